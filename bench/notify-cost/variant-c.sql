-- (c) one NOTIFY per inserted row, the new id as payload.
\i variant-a.sql
CREATE OR REPLACE FUNCTION bench_notify_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('messages', NEW.id::text);
  RETURN NULL;
END $$;
CREATE TRIGGER bench_notify_row AFTER INSERT ON messages FOR EACH ROW EXECUTE FUNCTION bench_notify_row();
