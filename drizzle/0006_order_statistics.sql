CREATE TABLE "pagination_counts" (
	"table_name" text NOT NULL,
	"key" text NOT NULL,
	"dim" text NOT NULL,
	"bucket" bigint NOT NULL,
	"slot" integer NOT NULL,
	"n" bigint NOT NULL,
	"writes" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "pagination_counts_table_name_key_dim_bucket_slot_pk" PRIMARY KEY("table_name","key","dim","bucket","slot")
);
--> statement-breakpoint
-- The order-statistic index (CONTRACT 7: exact at any depth, whoever writes). Triggers keep, in the
-- writing transaction, the number of rows per filter value (`key`: '' for all rows, 'priority=high',
-- ...) and, for the sort keys that need it, per bucket of the sort key at several levels (`dim`
-- 'id:0'..'id:3', 'created:0'..'created:3'; a level-L bucket is the level-0 bucket >> 8L). Writers add
-- to the slot of their own backend (pg_backend_pid), so concurrent writers, another client's long
-- bulk load included, never wait on a shared row. `writes` only grows: its sum is the table's version.
DROP TRIGGER IF EXISTS messages_count_insert ON messages;--> statement-breakpoint
DROP TRIGGER IF EXISTS messages_count_delete ON messages;--> statement-breakpoint
DROP TRIGGER IF EXISTS messages_count_truncate ON messages;--> statement-breakpoint
DROP FUNCTION IF EXISTS messages_count_insert();--> statement-breakpoint
DROP FUNCTION IF EXISTS messages_count_delete();--> statement-breakpoint
DROP FUNCTION IF EXISTS messages_count_truncate();--> statement-breakpoint
-- Level-0 bucket of a timestamp: 4096-second ranges; infinities get buckets beyond every finite one.
CREATE FUNCTION pagination_time_bucket(t timestamptz) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  -- Seconds since the epoch through an interval, which keeps the expression immutable and so inlined.
  SELECT CASE WHEN isfinite(t) THEN floor(extract(epoch FROM t - timestamptz '1970-01-01 00:00:00+00'))::bigint >> 12
              WHEN t > 'epoch'::timestamptz THEN 1::bigint << 40 ELSE -(1::bigint << 40) END
$$;--> statement-breakpoint
-- First and last instant of a level-0 time bucket, for the index seek that starts a page.
CREATE FUNCTION pagination_time_from(b bigint) RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN b >= 1::bigint << 40 THEN 'infinity'::timestamptz WHEN b <= -(1::bigint << 40) THEN '-infinity'::timestamptz
              ELSE to_timestamp((b << 12)::float8) END
$$;--> statement-breakpoint
CREATE FUNCTION pagination_time_until(b bigint) RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN b >= 1::bigint << 40 THEN 'infinity'::timestamptz WHEN b <= -(1::bigint << 40) THEN '-infinity'::timestamptz
              ELSE to_timestamp(((b + 1) << 12)::float8) - interval '1 microsecond' END
$$;--> statement-breakpoint
-- Adds a statement's changes to the writer's own slot: for each counted filter value (`ranked` ones
-- also by id and time bucket at four levels) the net number of rows. The changed rows arrive as
-- columns (sign +1 inserted, -1 deleted) and are grouped on their narrow keys before they fan out to
-- counter rows, so a bulk load costs a few hash aggregates, not one counter row per table row.
-- `writes`, on the '' total row, grows by the number of rows written, whatever they were. PL/pgSQL,
-- so each session plans the statement once.
CREATE FUNCTION messages_pagination_apply(signs integer[], priorities text[], ids bigint[], created timestamptz[], authors bigint[], subjects text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  WITH r AS MATERIALIZED (
    SELECT * FROM unnest(signs, priorities, ids, created, authors, subjects) AS u(s, p, id, t, a, subj)),
  base AS (
    SELECT r.p, r.id >> 8 AS i, pagination_time_bucket(r.t) AS tb, sum(r.s) AS n FROM r GROUP BY 1, 2, 3),
  changes AS (
    SELECT k.key, l.dim, l.bucket, sum(b.n) AS n FROM base b
    CROSS JOIN LATERAL (VALUES (''), ('priority=' || b.p)) AS k(key)
    CROSS JOIN LATERAL (VALUES ('total', 0::bigint),
      ('id:0', b.i), ('id:1', b.i >> 8), ('id:2', b.i >> 16), ('id:3', b.i >> 24),
      ('created:0', b.tb), ('created:1', b.tb >> 8), ('created:2', b.tb >> 16), ('created:3', b.tb >> 24)) AS l(dim, bucket)
    GROUP BY 1, 2, 3
    UNION ALL SELECT 'author_id=' || r.a, 'total', 0, sum(r.s) FROM r GROUP BY r.a
    -- Subjects are unbounded text: their key holds a hash. NULL subjects have no key.
    UNION ALL SELECT 'subject=' || md5(r.subj), 'total', 0, sum(r.s) FROM r WHERE r.subj IS NOT NULL GROUP BY r.subj)
  INSERT INTO pagination_counts AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT 'messages', ch.key, ch.dim, ch.bucket, pg_backend_pid(), ch.n,
    CASE WHEN ch.key = '' AND ch.dim = 'total' THEN (SELECT count(*) FROM r) ELSE 0 END
  FROM changes ch WHERE ch.n <> 0 OR (ch.key = '' AND ch.dim = 'total')
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes;
END $$;--> statement-breakpoint
CREATE FUNCTION users_pagination_apply(signs integer[], roles text[], ids bigint[], created timestamptz[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  WITH r AS MATERIALIZED (SELECT * FROM unnest(signs, roles, ids, created) AS u(s, role, id, t)),
  base AS (
    SELECT md5(r.role) AS role, r.id >> 8 AS i, pagination_time_bucket(r.t) AS tb, sum(r.s) AS n FROM r GROUP BY 1, 2, 3),
  changes AS (
    SELECT k.key, l.dim, l.bucket, sum(b.n) AS n FROM base b
    CROSS JOIN LATERAL (VALUES (''), ('role=' || b.role)) AS k(key)
    CROSS JOIN LATERAL (VALUES ('total', 0::bigint),
      ('id:0', b.i), ('id:1', b.i >> 8), ('id:2', b.i >> 16), ('id:3', b.i >> 24),
      ('created:0', b.tb), ('created:1', b.tb >> 8), ('created:2', b.tb >> 16), ('created:3', b.tb >> 24)) AS l(dim, bucket)
    GROUP BY 1, 2, 3)
  INSERT INTO pagination_counts AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT 'users', ch.key, ch.dim, ch.bucket, pg_backend_pid(), ch.n,
    CASE WHEN ch.key = '' AND ch.dim = 'total' THEN (SELECT count(*) FROM r) ELSE 0 END
  FROM changes ch WHERE ch.n <> 0 OR (ch.key = '' AND ch.dim = 'total')
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes;
END $$;--> statement-breakpoint
CREATE FUNCTION movies_pagination_apply(signs integer[], genres text[], years integer[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  WITH r AS MATERIALIZED (SELECT * FROM unnest(signs, genres, years) AS u(s, genre, year)),
  changes AS (
    SELECT '' AS key, sum(r.s) AS n FROM r
    UNION ALL SELECT 'genre=' || md5(r.genre), sum(r.s) FROM r GROUP BY r.genre
    UNION ALL SELECT 'year=' || r.year, sum(r.s) FROM r GROUP BY r.year)
  INSERT INTO pagination_counts AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT 'movies', ch.key, 'total', 0, pg_backend_pid(), ch.n, CASE WHEN ch.key = '' THEN (SELECT count(*) FROM r) ELSE 0 END
  FROM changes ch WHERE ch.n <> 0 OR ch.key = ''
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes;
END $$;--> statement-breakpoint
-- One trigger function per table for INSERT, DELETE and UPDATE (an update counts as its old rows
-- leaving and its new rows arriving). A transition table exists only for the operations that have it.
CREATE FUNCTION messages_pagination_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM messages_pagination_apply(array_agg(1), array_agg(r.priority::text), array_agg(r.id), array_agg(r.created_at), array_agg(r.author_id), array_agg(r.subject)) FROM new_rows r;
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM messages_pagination_apply(array_agg(-1), array_agg(r.priority::text), array_agg(r.id), array_agg(r.created_at), array_agg(r.author_id), array_agg(r.subject)) FROM old_rows r;
  ELSE
    PERFORM messages_pagination_apply(array_agg(r.s), array_agg(r.priority::text), array_agg(r.id), array_agg(r.created_at), array_agg(r.author_id), array_agg(r.subject))
    FROM (SELECT 1 AS s, priority, id, created_at, author_id, subject FROM new_rows
          UNION ALL SELECT -1, priority, id, created_at, author_id, subject FROM old_rows) r;
  END IF;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION users_pagination_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM users_pagination_apply(array_agg(1), array_agg(r.role), array_agg(r.id), array_agg(r.created_at)) FROM new_rows r;
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM users_pagination_apply(array_agg(-1), array_agg(r.role), array_agg(r.id), array_agg(r.created_at)) FROM old_rows r;
  ELSE
    PERFORM users_pagination_apply(array_agg(r.s), array_agg(r.role), array_agg(r.id), array_agg(r.created_at))
    FROM (SELECT 1 AS s, role, id, created_at FROM new_rows UNION ALL SELECT -1, role, id, created_at FROM old_rows) r;
  END IF;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION movies_pagination_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM movies_pagination_apply(array_agg(1), array_agg(r.genre), array_agg(r.year)) FROM new_rows r;
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM movies_pagination_apply(array_agg(-1), array_agg(r.genre), array_agg(r.year)) FROM old_rows r;
  ELSE
    PERFORM movies_pagination_apply(array_agg(r.s), array_agg(r.genre), array_agg(r.year))
    FROM (SELECT 1 AS s, genre, year FROM new_rows UNION ALL SELECT -1, genre, year FROM old_rows) r;
  END IF;
  RETURN NULL;
END $$;--> statement-breakpoint
-- TRUNCATE empties a table's counters but keeps its version growing, so no cached read survives it.
CREATE FUNCTION pagination_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  version bigint := (SELECT coalesce(sum(writes), 0) FROM pagination_counts WHERE table_name = TG_TABLE_NAME AND key = '' AND dim = 'total');
BEGIN
  DELETE FROM pagination_counts WHERE table_name = TG_TABLE_NAME;
  INSERT INTO pagination_counts (table_name, key, dim, bucket, slot, n, writes) VALUES (TG_TABLE_NAME, '', 'total', 0, 0, 0, version + 1);
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER messages_pagination_insert AFTER INSERT ON messages REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION messages_pagination_count();--> statement-breakpoint
CREATE TRIGGER messages_pagination_delete AFTER DELETE ON messages REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION messages_pagination_count();--> statement-breakpoint
CREATE TRIGGER messages_pagination_update AFTER UPDATE ON messages REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION messages_pagination_count();--> statement-breakpoint
CREATE TRIGGER messages_pagination_truncate AFTER TRUNCATE ON messages FOR EACH STATEMENT EXECUTE FUNCTION pagination_truncate();--> statement-breakpoint
CREATE TRIGGER users_pagination_insert AFTER INSERT ON users REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION users_pagination_count();--> statement-breakpoint
CREATE TRIGGER users_pagination_delete AFTER DELETE ON users REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION users_pagination_count();--> statement-breakpoint
CREATE TRIGGER users_pagination_update AFTER UPDATE ON users REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION users_pagination_count();--> statement-breakpoint
CREATE TRIGGER users_pagination_truncate AFTER TRUNCATE ON users FOR EACH STATEMENT EXECUTE FUNCTION pagination_truncate();--> statement-breakpoint
CREATE TRIGGER movies_pagination_insert AFTER INSERT ON movies REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION movies_pagination_count();--> statement-breakpoint
CREATE TRIGGER movies_pagination_delete AFTER DELETE ON movies REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION movies_pagination_count();--> statement-breakpoint
CREATE TRIGGER movies_pagination_update AFTER UPDATE ON movies REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION movies_pagination_count();--> statement-breakpoint
CREATE TRIGGER movies_pagination_truncate AFTER TRUNCATE ON movies FOR EACH STATEMENT EXECUTE FUNCTION pagination_truncate();--> statement-breakpoint
-- Existing rows, counted once.
SELECT messages_pagination_apply(array_agg(1), array_agg(r.priority::text), array_agg(r.id), array_agg(r.created_at), array_agg(r.author_id), array_agg(r.subject)) FROM messages r;--> statement-breakpoint
SELECT users_pagination_apply(array_agg(1), array_agg(r.role), array_agg(r.id), array_agg(r.created_at)) FROM users r;--> statement-breakpoint
SELECT movies_pagination_apply(array_agg(1), array_agg(r.genre), array_agg(r.year)) FROM movies r;--> statement-breakpoint
-- Every table has its '' total row, even when empty, so its version exists from the start.
INSERT INTO pagination_counts (table_name, key, dim, bucket, slot, n, writes)
SELECT t, '', 'total', 0, 0, 0, 1 FROM unnest(ARRAY['messages', 'users', 'movies']) AS t
ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET writes = pagination_counts.writes + 1;--> statement-breakpoint
-- Folds every unlocked writer slot into slot 0 and drops empty bucket rows. Run by the service on its
-- primary now and then; never needed for exactness, only to keep the sums short. SKIP LOCKED: it never
-- waits for, nor blocks, a writer; the advisory lock keeps two instances from compacting at once.
CREATE FUNCTION pagination_compact() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  moved bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(7300452032) THEN RETURN 0; END IF;
  WITH taken AS (
    DELETE FROM pagination_counts c WHERE c.ctid IN (
      SELECT ctid FROM pagination_counts WHERE slot <> 0 FOR UPDATE SKIP LOCKED)
    RETURNING c.table_name, c.key, c.dim, c.bucket, c.n, c.writes
  ), folded AS (
    INSERT INTO pagination_counts AS c (table_name, key, dim, bucket, slot, n, writes)
    SELECT t.table_name, t.key, t.dim, t.bucket, 0, sum(t.n), sum(t.writes) FROM taken t GROUP BY 1, 2, 3, 4
    ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes
    RETURNING 1
  )
  SELECT count(*) INTO moved FROM folded;
  DELETE FROM pagination_counts c WHERE c.slot = 0 AND c.n = 0 AND c.writes = 0 AND c.ctid IN (
    SELECT ctid FROM pagination_counts WHERE slot = 0 AND n = 0 AND writes = 0 FOR UPDATE SKIP LOCKED);
  RETURN moved;
END $$;
--> statement-breakpoint
-- Recounts every counter from the tables themselves, for after a load that bypassed triggers
-- (session_replication_role = replica, or triggers disabled by hand). Writers wait while it runs;
-- versions keep growing, so nothing cached before it is served after it.
CREATE FUNCTION pagination_rebuild() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  versions jsonb := (SELECT coalesce(jsonb_object_agg(table_name, w), '{}') FROM (
    SELECT table_name, sum(writes) AS w FROM pagination_counts WHERE key = '' AND dim = 'total' GROUP BY table_name) v);
BEGIN
  LOCK TABLE messages, users, movies IN SHARE MODE;
  DELETE FROM pagination_counts;
  PERFORM messages_pagination_apply(array_agg(1), array_agg(r.priority::text), array_agg(r.id), array_agg(r.created_at), array_agg(r.author_id), array_agg(r.subject)) FROM messages r;
  PERFORM users_pagination_apply(array_agg(1), array_agg(r.role), array_agg(r.id), array_agg(r.created_at)) FROM users r;
  PERFORM movies_pagination_apply(array_agg(1), array_agg(r.genre), array_agg(r.year)) FROM movies r;
  INSERT INTO pagination_counts AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT t, '', 'total', 0, 0, 0, coalesce((versions ->> t)::bigint, 0) + 1 FROM unnest(ARRAY['messages', 'users', 'movies']) AS t
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET writes = c.writes + excluded.writes;
END $$;
