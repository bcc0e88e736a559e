-- Statement-level triggers keep row_counts exact for messages: one update per statement, however
-- many rows it touched (batch inserts, cascaded deletes), and truncate resets it.
CREATE FUNCTION messages_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE row_counts SET row_count = row_count + (SELECT count(*) FROM new_rows) WHERE table_name = 'messages';
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION messages_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE row_counts SET row_count = row_count - (SELECT count(*) FROM old_rows) WHERE table_name = 'messages';
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION messages_count_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE row_counts SET row_count = 0 WHERE table_name = 'messages';
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER messages_count_insert AFTER INSERT ON messages REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION messages_count_insert();
--> statement-breakpoint
CREATE TRIGGER messages_count_delete AFTER DELETE ON messages REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION messages_count_delete();
--> statement-breakpoint
CREATE TRIGGER messages_count_truncate AFTER TRUNCATE ON messages FOR EACH STATEMENT EXECUTE FUNCTION messages_count_truncate();
--> statement-breakpoint
INSERT INTO row_counts (table_name, row_count) SELECT 'messages', count(*) FROM messages;
