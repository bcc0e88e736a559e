-- (d) a statement trigger that does nothing: the cost of one more trigger call, without NOTIFY.
\i variant-a.sql
CREATE OR REPLACE FUNCTION bench_noop_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RETURN NULL;
END $$;
CREATE TRIGGER bench_noop_stmt AFTER INSERT ON messages FOR EACH STATEMENT EXECUTE FUNCTION bench_noop_stmt();
