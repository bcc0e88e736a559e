-- (a) as migrated: only the project's own statement triggers (change log, pagination counts).
SET client_min_messages = warning;
DROP TRIGGER IF EXISTS bench_notify_stmt ON messages;
DROP TRIGGER IF EXISTS bench_notify_row ON messages;
DROP TRIGGER IF EXISTS bench_noop_stmt ON messages;
