import { BUCKET_LEVELS, keySql, MESSAGE_KEYS, MOVIE_KEYS, prefixSql, USER_KEYS, valueSql } from './counter-keys.js'

// The canonical definition of every function a live trigger runs: the trigger functions themselves and
// the counting functions they call, and the compaction and the recount of what they write. The migrations in drizzle/ create them; a migration that changes
// one copies its text from here, and test/db/triggers.test.ts compares each with pg_get_functiondef on
// a migrated database, so this file is what the database runs.

export interface FunctionDefinition {
  name: string
  /** The arguments as pg_get_functiondef renders them. */
  args: string
  returns: 'trigger' | 'void' | 'bigint'
  /** The PL/pgSQL source between the dollar quotes. */
  body: string
}

const levels = (dim: 'id' | 'created', bucket: string): string =>
  Array.from({ length: BUCKET_LEVELS }, (_, level) => `('${dim}:${level}', ${level === 0 ? bucket : `${bucket} >> ${8 * level}`})`).join(', ')

// Adds a statement's changes to the writer's own slot: the net number of rows per counted key, and for
// the ranked keys per bucket. The grouping is written once, here: every trigger path passes its rows
// in (transition tables cannot be passed to a function, so as arrays).
const messagesApply: FunctionDefinition = {
  name: 'messages_pagination_apply',
  args: 'signs integer[], priorities text[], ids bigint[], created timestamp with time zone[], authors bigint[], subjects text[]',
  returns: 'void',
  body: `
BEGIN
  WITH r AS MATERIALIZED (
    SELECT * FROM unnest(signs, priorities, ids, created, authors, subjects) AS u(s, p, id, t, a, subj)),
  base AS (
    SELECT r.p, r.id >> 8 AS i, pagination_time_bucket(r.t) AS tb, sum(r.s) AS n FROM r GROUP BY 1, 2, 3),
  by_subject AS (
    SELECT ${keySql(MESSAGE_KEYS.subject, 'r.subj')} AS key, r.id >> 8 AS i, sum(r.s) AS n FROM r GROUP BY 1, 2),
  changes AS (
    SELECT k.key, l.dim, l.bucket, sum(b.n) AS n FROM base b
    CROSS JOIN LATERAL (VALUES (''), (${keySql(MESSAGE_KEYS.priority, 'b.p')})) AS k(key)
    CROSS JOIN LATERAL (VALUES ('total', 0::bigint),
      ${levels('id', 'b.i')},
      ${levels('created', 'b.tb')}) AS l(dim, bucket)
    GROUP BY 1, 2, 3
    UNION ALL SELECT ${keySql(MESSAGE_KEYS.authorId, 'r.a')}, 'total', 0, sum(r.s) FROM r GROUP BY r.a
    UNION ALL SELECT b.key, l.dim, l.bucket, sum(b.n) FROM by_subject b
    CROSS JOIN LATERAL (VALUES ('total', 0::bigint), ${levels('id', 'b.i')}) AS l(dim, bucket)
    GROUP BY 1, 2, 3)
  INSERT INTO pagination_counts_written AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT 'messages', ch.key, ch.dim, ch.bucket, pg_backend_pid(), ch.n,
    CASE WHEN ch.key = '' AND ch.dim = 'total' THEN (SELECT count(*) FROM r) ELSE 0 END
  FROM changes ch WHERE ch.n <> 0 OR (ch.key = '' AND ch.dim = 'total')
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes;
END `
}

const messagesCount: FunctionDefinition = {
  name: 'messages_pagination_count',
  args: '',
  returns: 'trigger',
  body: `
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
END `
}

const usersApply: FunctionDefinition = {
  name: 'users_pagination_apply',
  args: 'signs integer[], roles text[], ids bigint[], created timestamp with time zone[]',
  returns: 'void',
  body: `
BEGIN
  WITH r AS MATERIALIZED (SELECT * FROM unnest(signs, roles, ids, created) AS u(s, role, id, t)),
  base AS (
    SELECT ${valueSql(USER_KEYS.role, 'r.role')} AS role, r.id >> 8 AS i, pagination_time_bucket(r.t) AS tb, sum(r.s) AS n FROM r GROUP BY 1, 2, 3),
  changes AS (
    SELECT k.key, l.dim, l.bucket, sum(b.n) AS n FROM base b
    CROSS JOIN LATERAL (VALUES (''), (${prefixSql(USER_KEYS.role, 'b.role')})) AS k(key)
    CROSS JOIN LATERAL (VALUES ('total', 0::bigint),
      ${levels('id', 'b.i')},
      ${levels('created', 'b.tb')}) AS l(dim, bucket)
    GROUP BY 1, 2, 3)
  INSERT INTO pagination_counts_written AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT 'users', ch.key, ch.dim, ch.bucket, pg_backend_pid(), ch.n,
    CASE WHEN ch.key = '' AND ch.dim = 'total' THEN (SELECT count(*) FROM r) ELSE 0 END
  FROM changes ch WHERE ch.n <> 0 OR (ch.key = '' AND ch.dim = 'total')
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes;
END `
}

const usersCount: FunctionDefinition = {
  name: 'users_pagination_count',
  args: '',
  returns: 'trigger',
  body: `
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
END `
}

const moviesApply: FunctionDefinition = {
  name: 'movies_pagination_apply',
  args: 'signs integer[], genres text[], years integer[]',
  returns: 'void',
  body: `
BEGIN
  WITH r AS MATERIALIZED (SELECT * FROM unnest(signs, genres, years) AS u(s, genre, year)),
  changes AS (
    SELECT '' AS key, sum(r.s) AS n FROM r
    UNION ALL SELECT ${keySql(MOVIE_KEYS.genre, 'r.genre')}, sum(r.s) FROM r GROUP BY r.genre
    UNION ALL SELECT ${keySql(MOVIE_KEYS.year, 'r.year')}, sum(r.s) FROM r GROUP BY r.year)
  INSERT INTO pagination_counts_written AS c (table_name, key, dim, bucket, slot, n, writes)
  SELECT 'movies', ch.key, 'total', 0, pg_backend_pid(), ch.n, CASE WHEN ch.key = '' THEN (SELECT count(*) FROM r) ELSE 0 END
  FROM changes ch WHERE ch.n <> 0 OR ch.key = ''
  ON CONFLICT (table_name, key, dim, bucket, slot) DO UPDATE SET n = c.n + excluded.n, writes = c.writes + excluded.writes;
END `
}

const moviesCount: FunctionDefinition = {
  name: 'movies_pagination_count',
  args: '',
  returns: 'trigger',
  body: `
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
END `
}

// TRUNCATE empties a table's counters but keeps its version growing, so no cached read survives it.
const paginationTruncate: FunctionDefinition = {
  name: 'pagination_truncate',
  args: '',
  returns: 'trigger',
  body: `
DECLARE
  version bigint := (SELECT coalesce(sum(writes), 0) FROM pagination_counts WHERE table_name = TG_TABLE_NAME AND key = '' AND dim = 'total');
BEGIN
  DELETE FROM pagination_counts WHERE table_name = TG_TABLE_NAME;
  INSERT INTO pagination_counts_folded (table_name, key, dim, bucket, slot, n, writes) VALUES (TG_TABLE_NAME, '', 'total', 0, 0, 0, version + 1);
  RETURN NULL;
END `
}

// pagination_counts is partitioned by slot (drizzle/0019): the writers' slots in pagination_counts_written,
// whose index holds no count, so that a writer's update is heap-only; slot 0 in pagination_counts_folded,
// whose primary key carries each count, so that a located page reads the counts of buckets no write
// touches any more from the index alone. Each function here writes the partition it means, whose own
// unique index is the ON CONFLICT arbiter: the parent has none, which spared the migration an index
// build over every folded row.

// Folds every unlocked writer slot into slot 0 and drops empty bucket rows; run by the service on its
// primary now and then (plugins/db.ts), never needed for exactness. SKIP LOCKED: it never waits for, nor
// blocks, a writer; the advisory lock keeps two instances from compacting at once.
const paginationCompact: FunctionDefinition = {
  name: 'pagination_compact',
  args: '',
  returns: 'bigint',
  body: `
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
END `
}

// Recounts every counter from the tables themselves, for after a load that bypassed the triggers
// (session_replication_role = replica, or triggers disabled by hand). Writers wait while it runs;
// versions keep growing, so nothing cached before it is served after it.
const paginationRebuild: FunctionDefinition = {
  name: 'pagination_rebuild',
  args: '',
  returns: 'void',
  body: `
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
END `
}

// Delta sync (drizzle/0010): every statement that writes messages records the ids it wrote.
const messagesLogChanges: FunctionDefinition = {
  name: 'messages_log_changes',
  args: '',
  returns: 'trigger',
  body: `
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
END `
}

// A message shows its author's name: renaming a user changes every message of theirs.
const usersLogMessageChanges: FunctionDefinition = {
  name: 'users_log_message_changes',
  args: '',
  returns: 'trigger',
  body: `
BEGIN
  INSERT INTO message_changes (xid, id)
  SELECT pg_current_xact_id(), m.id FROM new_rows n JOIN old_rows o ON o.id = n.id JOIN messages m ON m.author_id = n.id
  WHERE n.name IS DISTINCT FROM o.name
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END `
}

// TRUNCATE writes no rows to log: it starts a new epoch, and every token issued before it is 410.
const messagesLogTruncate: FunctionDefinition = {
  name: 'messages_log_truncate',
  args: '',
  returns: 'trigger',
  body: `
BEGIN
  TRUNCATE message_changes;
  UPDATE sync_state SET epoch = epoch + 1;
  RETURN NULL;
END `
}

export const TRIGGER_FUNCTIONS: readonly FunctionDefinition[] = [
  messagesApply, messagesCount, usersApply, usersCount, moviesApply, moviesCount,
  paginationTruncate, paginationCompact, paginationRebuild, messagesLogChanges, usersLogMessageChanges, messagesLogTruncate
]

/** The definition as pg_get_functiondef renders it (every function here is PL/pgSQL in `public`). */
export const functionDefSql = (f: FunctionDefinition): string =>
  `CREATE OR REPLACE FUNCTION public.${f.name}(${f.args})\n RETURNS ${f.returns}\n LANGUAGE plpgsql\nAS $function$${f.body}$function$\n`
