-- A page by subject asked before its anchors exist (src/pages/anchors/) is located like a page by
-- priority (src/pages/grouped.ts): the subjects' totals in their order tell which subject holds the
-- offset, and inside it the order is by id, located in that subject's id buckets. So each subject's
-- counter key ('subject=' || md5(subject), and 'subject:none' for messages without one) now also
-- keeps the four id levels. The cost: up to five more counter rows per create (about 20 before).
-- messages_pagination_apply (deletes, updates, rebuilds) and the insert path of the trigger keep
-- them in step, as drizzle/0008 requires.
CREATE OR REPLACE FUNCTION messages_pagination_apply(signs integer[], priorities text[], ids bigint[], created timestamptz[], authors bigint[], subjects text[])
RETURNS void LANGUAGE plpgsql AS $$
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
      ('id:0', b.i), ('id:1', b.i >> 8), ('id:2', b.i >> 16), ('id:3', b.i >> 24),
      ('created:0', b.tb), ('created:1', b.tb >> 8), ('created:2', b.tb >> 16), ('created:3', b.tb >> 24)) AS l(dim, bucket)
    GROUP BY 1, 2, 3
    UNION ALL SELECT 'author_id=' || r.a, 'total', 0, sum(r.s) FROM r GROUP BY r.a
    UNION ALL SELECT b.key, l.dim, l.bucket, sum(b.n) FROM by_subject b
    CROSS JOIN LATERAL (VALUES ('total', 0::bigint), ('id:0', b.i), ('id:1', b.i >> 8), ('id:2', b.i >> 16), ('id:3', b.i >> 24)) AS l(dim, bucket)
    GROUP BY 1, 2, 3)
  INSERT INTO pagination_counts AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT 'messages', ch.key, ch.dim, ch.bucket, pg_backend_pid(), ch.n,
    CASE WHEN ch.key = '' AND ch.dim = 'total' THEN (SELECT count(*) FROM r) ELSE 0 END
  FROM changes ch WHERE ch.n <> 0 OR (ch.key = '' AND ch.dim = 'total')
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes;
END $$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION messages_pagination_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    WITH r AS (SELECT 1 AS s, n.priority::text AS p, n.id, n.created_at AS t, n.author_id AS a, n.subject AS subj FROM new_rows n),
    base AS (
      SELECT r.p, r.id >> 8 AS i, pagination_time_bucket(r.t) AS tb, sum(r.s) AS n FROM r GROUP BY 1, 2, 3),
    by_subject AS (
      SELECT coalesce('subject=' || md5(r.subj), 'subject:none') AS key, r.id >> 8 AS i, sum(r.s) AS n FROM r GROUP BY 1, 2),
    changes AS (
      SELECT k.key, l.dim, l.bucket, sum(b.n) AS n FROM base b
      CROSS JOIN LATERAL (VALUES (''), ('priority=' || b.p)) AS k(key)
      CROSS JOIN LATERAL (VALUES ('total', 0::bigint),
        ('id:0', b.i), ('id:1', b.i >> 8), ('id:2', b.i >> 16), ('id:3', b.i >> 24),
        ('created:0', b.tb), ('created:1', b.tb >> 8), ('created:2', b.tb >> 16), ('created:3', b.tb >> 24)) AS l(dim, bucket)
      GROUP BY 1, 2, 3
      UNION ALL SELECT 'author_id=' || r.a, 'total', 0, sum(r.s) FROM r GROUP BY r.a
      UNION ALL SELECT b.key, l.dim, l.bucket, sum(b.n) FROM by_subject b
      CROSS JOIN LATERAL (VALUES ('total', 0::bigint), ('id:0', b.i), ('id:1', b.i >> 8), ('id:2', b.i >> 16), ('id:3', b.i >> 24)) AS l(dim, bucket)
      GROUP BY 1, 2, 3)
    INSERT INTO pagination_counts AS c (table_name, key, dim, bucket, slot, n, writes)
    SELECT 'messages', ch.key, ch.dim, ch.bucket, pg_backend_pid(), ch.n,
      CASE WHEN ch.key = '' AND ch.dim = 'total' THEN (SELECT count(*) FROM r) ELSE 0 END
    FROM changes ch WHERE ch.n <> 0 OR (ch.key = '' AND ch.dim = 'total')
    ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes;
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM messages_pagination_apply(array_agg(-1), array_agg(r.priority::text), array_agg(r.id), array_agg(r.created_at), array_agg(r.author_id), array_agg(r.subject)) FROM old_rows r;
  ELSE
    PERFORM messages_pagination_apply(array_agg(r.s), array_agg(r.priority::text), array_agg(r.id), array_agg(r.created_at), array_agg(r.author_id), array_agg(r.subject))
    FROM (SELECT 1 AS s, priority, id, created_at, author_id, subject FROM new_rows
          UNION ALL SELECT -1, priority, id, created_at, author_id, subject FROM old_rows) r;
  END IF;
  RETURN NULL;
END $$;--> statement-breakpoint
-- Existing messages, counted once: writers wait meanwhile (SHARE), so none is counted twice or missed
-- between the functions above and this count.
LOCK TABLE messages IN SHARE MODE;--> statement-breakpoint
INSERT INTO pagination_counts AS c (table_name, key, dim, bucket, slot, n, writes)
SELECT 'messages', b.key, l.dim, l.bucket, 0, sum(b.n), 0 FROM (
  SELECT coalesce('subject=' || md5(m.subject), 'subject:none') AS key, m.id >> 8 AS i, count(*) AS n FROM messages m GROUP BY m.subject, m.id >> 8) b
CROSS JOIN LATERAL (VALUES ('id:0', b.i), ('id:1', b.i >> 8), ('id:2', b.i >> 16), ('id:3', b.i >> 24)) AS l(dim, bucket)
GROUP BY 1, 2, 3, 4
ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n;--> statement-breakpoint
INSERT INTO pagination_counts AS c (table_name, key, dim, bucket, slot, n, writes)
SELECT 'messages', 'subject:none', 'total', 0, 0, count(*), 0 FROM messages WHERE subject IS NULL HAVING count(*) > 0
ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n;
