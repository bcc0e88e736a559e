-- (b) one NOTIFY per INSERT statement, empty payload.
\i variant-a.sql
CREATE OR REPLACE FUNCTION bench_notify_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('messages', '');
  RETURN NULL;
END $$;
CREATE TRIGGER bench_notify_stmt AFTER INSERT ON messages FOR EACH STATEMENT EXECUTE FUNCTION bench_notify_stmt();
