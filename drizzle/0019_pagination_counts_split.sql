-- Creates cost less: a counter row is updated in place again, and 5 fewer of them are written.
--
-- A create adds to 24 counter rows (19 from now on: the fourth level of buckets goes, below), each an
-- update of its writer's slot. Since drizzle/0016 the primary key carried each count, so that located
-- pages read counts from the index alone; but with n in an index no update is heap-only, and each of
-- those updates added an index entry. The table is now partitioned by slot: the writers' slots in
-- pagination_counts_written, whose unique index holds no count, so their updates are heap-only; slot 0,
-- the slots folded together by pagination_compact(), in pagination_counts_folded, the table as it was,
-- whose primary key still carries each count. Readers read pagination_counts as before; a bucket no
-- write touches any more has only its slot-0 row, read from the index. Each function that writes
-- counters now writes the partition it means, whose own unique index is its ON CONFLICT arbiter: an
-- index on the parent would have been built over every folded row here, 3.3 s at 10,000,000 messages
-- with every reader and writer of the counters waiting
-- (docs/performance.md#sitting-s13-creates-and-pages-with-the-counters-split).
--
-- The fourth level held a single bucket until ids pass 2^32 and times the year 2100; located pages stopped
-- reading it a release ago (src/db/triggers/counter-keys.ts), so removing it breaks no instance still
-- running that release.
DELETE FROM pagination_counts WHERE dim IN ('id:3', 'created:3');--> statement-breakpoint
CREATE TABLE pagination_counts_written (LIKE pagination_counts INCLUDING DEFAULTS);--> statement-breakpoint
WITH moved AS (DELETE FROM pagination_counts WHERE slot <> 0 RETURNING *)
INSERT INTO pagination_counts_written SELECT * FROM moved;--> statement-breakpoint
CREATE UNIQUE INDEX pagination_counts_written_key ON pagination_counts_written (table_name, key, dim, bucket, slot);--> statement-breakpoint
ALTER TABLE pagination_counts RENAME TO pagination_counts_folded;--> statement-breakpoint
ALTER TABLE pagination_counts_folded RENAME CONSTRAINT pagination_counts_table_name_key_dim_bucket_slot_pk TO pagination_counts_folded_pkey;--> statement-breakpoint
-- Proves the partition's bound, so attaching it reads none of its rows.
ALTER TABLE pagination_counts_folded ADD CONSTRAINT pagination_counts_folded_slot CHECK (slot = 0);--> statement-breakpoint
CREATE TABLE pagination_counts (LIKE pagination_counts_folded INCLUDING DEFAULTS) PARTITION BY LIST (slot);--> statement-breakpoint
ALTER TABLE pagination_counts ATTACH PARTITION pagination_counts_folded FOR VALUES IN (0);--> statement-breakpoint
ALTER TABLE pagination_counts ATTACH PARTITION pagination_counts_written DEFAULT;--> statement-breakpoint
ALTER TABLE pagination_counts_folded DROP CONSTRAINT pagination_counts_folded_slot;--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.messages_pagination_apply(signs integer[], priorities text[], ids bigint[], created timestamp with time zone[], authors bigint[], subjects text[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
  WITH r AS MATERIALIZED (
    SELECT * FROM unnest(signs, priorities, ids, created, authors, subjects) AS u(s, p, id, t, a, subj)),
  base AS (
    SELECT r.p, r.id >> 8 AS i, pagination_time_bucket(r.t) AS tb, sum(r.s) AS n FROM r GROUP BY 1, 2, 3),
  by_subject AS (
    SELECT coalesce('subject=' || md5(r.subj), 'subject:none') AS key, r.id >> 8 AS i, sum(r.s) AS n FROM r GROUP BY 1, 2),
  changes AS (
    SELECT k.key, l.dim, l.bucket, sum(b.n) AS n FROM base b
    CROSS JOIN LATERAL (VALUES (''), ('priority=' || b.p)) AS k(key)
    CROSS JOIN LATERAL (VALUES ('total', 0::bigint),
      ('id:0', b.i), ('id:1', b.i >> 8), ('id:2', b.i >> 16),
      ('created:0', b.tb), ('created:1', b.tb >> 8), ('created:2', b.tb >> 16)) AS l(dim, bucket)
    GROUP BY 1, 2, 3
    UNION ALL SELECT 'author_id=' || r.a, 'total', 0, sum(r.s) FROM r GROUP BY r.a
    UNION ALL SELECT b.key, l.dim, l.bucket, sum(b.n) FROM by_subject b
    CROSS JOIN LATERAL (VALUES ('total', 0::bigint), ('id:0', b.i), ('id:1', b.i >> 8), ('id:2', b.i >> 16)) AS l(dim, bucket)
    GROUP BY 1, 2, 3)
  INSERT INTO pagination_counts_written AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT 'messages', ch.key, ch.dim, ch.bucket, pg_backend_pid(), ch.n,
    CASE WHEN ch.key = '' AND ch.dim = 'total' THEN (SELECT count(*) FROM r) ELSE 0 END
  FROM changes ch WHERE ch.n <> 0 OR (ch.key = '' AND ch.dim = 'total')
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes;
END $function$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.users_pagination_apply(signs integer[], roles text[], ids bigint[], created timestamp with time zone[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
  WITH r AS MATERIALIZED (SELECT * FROM unnest(signs, roles, ids, created) AS u(s, role, id, t)),
  base AS (
    SELECT md5(r.role) AS role, r.id >> 8 AS i, pagination_time_bucket(r.t) AS tb, sum(r.s) AS n FROM r GROUP BY 1, 2, 3),
  changes AS (
    SELECT k.key, l.dim, l.bucket, sum(b.n) AS n FROM base b
    CROSS JOIN LATERAL (VALUES (''), ('role=' || b.role)) AS k(key)
    CROSS JOIN LATERAL (VALUES ('total', 0::bigint),
      ('id:0', b.i), ('id:1', b.i >> 8), ('id:2', b.i >> 16),
      ('created:0', b.tb), ('created:1', b.tb >> 8), ('created:2', b.tb >> 16)) AS l(dim, bucket)
    GROUP BY 1, 2, 3)
  INSERT INTO pagination_counts_written AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT 'users', ch.key, ch.dim, ch.bucket, pg_backend_pid(), ch.n,
    CASE WHEN ch.key = '' AND ch.dim = 'total' THEN (SELECT count(*) FROM r) ELSE 0 END
  FROM changes ch WHERE ch.n <> 0 OR (ch.key = '' AND ch.dim = 'total')
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes;
END $function$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.movies_pagination_apply(signs integer[], genres text[], years integer[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
  WITH r AS MATERIALIZED (SELECT * FROM unnest(signs, genres, years) AS u(s, genre, year)),
  changes AS (
    SELECT '' AS key, sum(r.s) AS n FROM r
    UNION ALL SELECT 'genre=' || md5(r.genre), sum(r.s) FROM r GROUP BY r.genre
    UNION ALL SELECT 'year=' || r.year, sum(r.s) FROM r GROUP BY r.year)
  INSERT INTO pagination_counts_written AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT 'movies', ch.key, 'total', 0, pg_backend_pid(), ch.n, CASE WHEN ch.key = '' THEN (SELECT count(*) FROM r) ELSE 0 END
  FROM changes ch WHERE ch.n <> 0 OR ch.key = ''
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes;
END $function$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.pagination_truncate()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
  version bigint := (SELECT coalesce(sum(writes), 0) FROM pagination_counts WHERE table_name = TG_TABLE_NAME AND key = '' AND dim = 'total');
BEGIN
  DELETE FROM pagination_counts WHERE table_name = TG_TABLE_NAME;
  INSERT INTO pagination_counts_folded (table_name, key, dim, bucket, slot, n, writes) VALUES (TG_TABLE_NAME, '', 'total', 0, 0, 0, version + 1);
  RETURN NULL;
END $function$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.pagination_compact()
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
  moved bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(7300452032) THEN RETURN 0; END IF;
  WITH taken AS (
    DELETE FROM pagination_counts_written c WHERE c.ctid IN (
      SELECT ctid FROM pagination_counts_written FOR UPDATE SKIP LOCKED)
    RETURNING c.table_name, c.key, c.dim, c.bucket, c.n, c.writes
  ), folded AS (
    INSERT INTO pagination_counts_folded AS c (table_name, key, dim, bucket, slot, n, writes)
    SELECT t.table_name, t.key, t.dim, t.bucket, 0, sum(t.n), sum(t.writes) FROM taken t GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes
    RETURNING 1
  )
  SELECT count(*) INTO moved FROM folded;
  DELETE FROM pagination_counts_folded c WHERE c.n = 0 AND c.writes = 0 AND c.ctid IN (
    SELECT ctid FROM pagination_counts_folded WHERE n = 0 AND writes = 0 FOR UPDATE SKIP LOCKED);
  RETURN moved;
END $function$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION public.pagination_rebuild()
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
  versions jsonb := (SELECT coalesce(jsonb_object_agg(table_name, w), '{}') FROM (
    SELECT table_name, sum(writes) AS w FROM pagination_counts WHERE key = '' AND dim = 'total' GROUP BY table_name) v);
BEGIN
  LOCK TABLE messages, users, movies IN SHARE MODE;
  DELETE FROM pagination_counts;
  PERFORM messages_pagination_apply(array_agg(1), array_agg(r.priority::text), array_agg(r.id), array_agg(r.created_at), array_agg(r.author_id), array_agg(r.subject)) FROM messages r;
  PERFORM users_pagination_apply(array_agg(1), array_agg(r.role), array_agg(r.id), array_agg(r.created_at)) FROM users r;
  PERFORM movies_pagination_apply(array_agg(1), array_agg(r.genre), array_agg(r.year)) FROM movies r;
  INSERT INTO pagination_counts_folded AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT t, '', 'total', 0, 0, 0, coalesce((versions ->> t)::bigint, 0) + 1 FROM unnest(ARRAY['messages', 'users', 'movies']) AS t
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET writes = c.writes + excluded.writes;
END $function$;
