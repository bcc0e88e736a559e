CREATE TABLE "message_changes" (
	"xid" "xid8" NOT NULL,
	"id" bigint NOT NULL,
	CONSTRAINT "message_changes_xid_id_pk" PRIMARY KEY("xid","id")
);
--> statement-breakpoint
CREATE TABLE "sync_marks" (
	"at" timestamp with time zone PRIMARY KEY NOT NULL,
	"oldest" "xid8" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sync_state" (
	"only" boolean PRIMARY KEY DEFAULT true NOT NULL,
	"epoch" bigint DEFAULT 1 NOT NULL,
	"horizon" "xid8" DEFAULT '0' NOT NULL
);
--> statement-breakpoint
ALTER TABLE "sync_state" ADD CONSTRAINT "sync_state_one_row" CHECK ("only");--> statement-breakpoint
INSERT INTO "sync_state" DEFAULT VALUES;--> statement-breakpoint
-- Delta sync (CONTRACT 12). Every statement that writes messages, from any client (the API, psql, COPY,
-- a cascade from users), records the ids it wrote under its transaction's id, in the writing
-- transaction: the entry becomes visible exactly when the write does, and never without it. The feed
-- reads the log in transaction-id order but only below the oldest transaction still running
-- (pg_snapshot_xmin): every transaction there has ended, so nothing can still commit before a point the
-- feed has passed. A transaction left open holds the feed at its id (changes committed after it wait)
-- and loses nothing. Statement triggers with transition tables, like the counters of drizzle/0006: a
-- bulk load costs one INSERT ... SELECT, not a trigger call per row.
CREATE FUNCTION messages_log_changes() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  x xid8 := pg_current_xact_id();
BEGIN
  -- A message shows its author's name, and a rename logs the author's messages (below), but only those
  -- it can see: not one this transaction is still writing. Holding the authors FOR SHARE until commit
  -- orders the two: a rename waits for this transaction and then sees its rows, or this one waits for
  -- the rename and is then read with the new name. (The foreign key's FOR KEY SHARE does not conflict
  -- with an update of the name, so it does not order them.)
  IF TG_OP <> 'DELETE' THEN
    PERFORM 1 FROM users u WHERE u.id IN (SELECT n.author_id FROM new_rows n) ORDER BY u.id FOR SHARE;
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO message_changes (xid, id) SELECT x, n.id FROM new_rows n ON CONFLICT DO NOTHING;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO message_changes (xid, id) SELECT x, o.id FROM old_rows o ON CONFLICT DO NOTHING;
  ELSE
    INSERT INTO message_changes (xid, id) SELECT x, r.id FROM (SELECT id FROM new_rows UNION SELECT id FROM old_rows) r ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END $$;--> statement-breakpoint
-- A message shows its author's name: renaming a user changes every message of theirs.
CREATE FUNCTION users_log_message_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO message_changes (xid, id)
  SELECT pg_current_xact_id(), m.id FROM new_rows n JOIN old_rows o ON o.id = n.id JOIN messages m ON m.author_id = n.id
  WHERE n.name IS DISTINCT FROM o.name
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;--> statement-breakpoint
-- TRUNCATE writes no rows to log: it starts a new epoch, and every token issued before it is 410.
CREATE FUNCTION messages_log_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  TRUNCATE message_changes;
  UPDATE sync_state SET epoch = epoch + 1;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER messages_log_insert AFTER INSERT ON messages REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION messages_log_changes();--> statement-breakpoint
CREATE TRIGGER messages_log_delete AFTER DELETE ON messages REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION messages_log_changes();--> statement-breakpoint
CREATE TRIGGER messages_log_update AFTER UPDATE ON messages REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION messages_log_changes();--> statement-breakpoint
CREATE TRIGGER messages_log_truncate AFTER TRUNCATE ON messages FOR EACH STATEMENT EXECUTE FUNCTION messages_log_truncate();--> statement-breakpoint
CREATE TRIGGER users_log_message_changes AFTER UPDATE ON users REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION users_log_message_changes();--> statement-breakpoint
-- Retention (SYNC_RETENTION_HOURS). Each run records the oldest running transaction now, then takes the
-- newest record at least `retention` old as the horizon: every token issued since then stands at or
-- above it. The horizon is raised and the log below it deleted in one transaction, so a reader sees
-- either both or neither; a batch at a time, oldest first. Deleting old entries never touches the rows
-- writers insert, so writers never wait; the advisory lock keeps two instances from pruning at once.
CREATE FUNCTION message_changes_prune(retention interval, batch integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  mark_at timestamptz;
  h xid8;
  gone bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(7300452033) THEN RETURN 0; END IF;
  INSERT INTO sync_marks (at, oldest) VALUES (now(), pg_snapshot_xmin(pg_current_snapshot())) ON CONFLICT DO NOTHING;
  SELECT s.at, s.oldest INTO mark_at, h FROM sync_marks s WHERE s.at <= now() - retention ORDER BY s.at DESC LIMIT 1;
  IF h IS NULL THEN RETURN 0; END IF;
  UPDATE sync_state SET horizon = greatest(horizon, h);
  DELETE FROM sync_marks WHERE at < mark_at;
  DELETE FROM message_changes c WHERE (c.xid, c.id) IN (
    SELECT d.xid, d.id FROM message_changes d WHERE d.xid < h ORDER BY d.xid, d.id LIMIT batch);
  GET DIAGNOSTICS gone = ROW_COUNT;
  RETURN gone;
END $$;
