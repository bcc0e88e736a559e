import { sql, type SQL } from 'drizzle-orm'
import t from 'tap'
import { createDb, type Database } from '../../src/db/client.js'
import { BUCKET_LEVELS, keyOf, MESSAGE_KEYS, MOVIE_KEYS, USER_KEYS } from '../../src/db/triggers/counter-keys.js'
import { functionDefSql, TRIGGER_FUNCTIONS } from '../../src/db/triggers/functions.js'
import { MESSAGE_COLLECTION } from '../../src/messages/collection.js'
import { freshDatabase } from '../helpers/database.js'
import { queryRows } from '../helpers/fixtures.js'

// The functions the triggers run are the ones src/db/triggers/functions.ts defines, and the counter keys
// they write are the ones the readers look up (src/db/triggers/counter-keys.ts).

const normalise = (text: string): string => text.replace(/\s+/g, ' ').trim()

const database = await freshDatabase()
const handle = await createDb({ url: database.dataDir === undefined ? database.url : undefined, dataDir: database.dataDir })
t.teardown(async () => {
  await handle.close()
  await database.drop()
})
await handle.migrate()
const db: Database = handle.db

const rows = async <T extends Record<string, unknown>>(query: SQL): Promise<T[]> => await queryRows<T>(db, query)
const keysOf = async (table: string): Promise<string[]> =>
  (await rows<{ key: string }>(sql`SELECT key FROM pagination_counts WHERE table_name = ${table} GROUP BY key HAVING sum(n) <> 0`)).map((r) => r.key).sort()

t.test('every function a trigger runs is defined once, in src/db/triggers/functions.ts, as the database has it', async (t) => {
  const live = await rows<{ name: string }>(sql`SELECT DISTINCT p.proname AS name FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid WHERE NOT g.tgisinternal ORDER BY 1`)
  const defined = new Set(TRIGGER_FUNCTIONS.map((f) => f.name))
  t.same(live.filter((f) => !defined.has(f.name)), [], 'no live trigger function without a canonical definition')
  for (const f of TRIGGER_FUNCTIONS) {
    const [found] = await rows<{ def: string }>(sql`SELECT pg_get_functiondef(p.oid) AS def FROM pg_proc p
      JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND p.proname = ${f.name}`)
    t.equal(normalise(found?.def ?? ''), normalise(functionDefSql(f)), `${f.name}: pg_get_functiondef matches its definition`)
  }
})

t.test('the triggers write the keys the readers build', async (t) => {
  const [alice, bob] = await rows<{ id: number }>(sql`INSERT INTO users (subject_id, email, name, role)
    VALUES ('keys-alice', 'alice@example.com', 'Alice', 'Admin'), ('keys-bob', NULL, NULL, 'User') RETURNING id::float8 AS id`)
  const subjects = ['Ops', 'déjà vu', "it's 100% = 'ok'"]
  await db.execute(sql`INSERT INTO messages (content, subject, priority, author_id) VALUES
    ('a', ${subjects[0]}, 'high', ${alice!.id}), ('b', ${subjects[1]}, 'low', ${bob!.id}),
    ('c', ${subjects[2]}, 'urgent', ${alice!.id}), ('d', NULL, 'normal', ${bob!.id})`)
  const filters = MESSAGE_COLLECTION.filters
  t.same(await keysOf('messages'), [
    '',
    ...[alice!.id, bob!.id].map((id) => filters.authorId.key!(id)),
    ...['high', 'low', 'normal', 'urgent'].map((p) => filters.priority.key!(p)),
    ...subjects.map((s) => filters.subject.key!(s)),
    MESSAGE_KEYS.subject.none
  ].sort(), 'messages: the total, each author, priority and subject, and the messages without a subject')

  // The keys of groups, as the grouped pages compute them in SQL (src/pages/grouped.ts).
  for (const [sort, value, expected] of [['priority', 'high', filters.priority.key!('high')], ['subject', subjects[2]!, filters.subject.key!(subjects[2]!)]] as const) {
    const expr = MESSAGE_COLLECTION.groupRanked![sort]!.key.replaceAll('$v', '(SELECT v FROM given)')
    const [found] = await rows<{ key: string }>(sql`WITH given AS (SELECT ${value}::text AS v) SELECT ${sql.raw(expr)} AS key`)
    t.equal(found?.key, expected, `grouped ${sort}: the key of ${JSON.stringify(value)}`)
  }
  t.equal(MESSAGE_COLLECTION.groupRanked!.subject!.noneKey, MESSAGE_KEYS.subject.none, 'grouped subject: the key of no subject')

  t.same(await keysOf('users'), ['', ...['Admin', 'User'].map(keyOf(USER_KEYS.role))].sort(), 'users: the total and each role')

  await db.execute(sql`DELETE FROM movies`)
  await db.execute(sql`INSERT INTO movies (title, year, rating, genre) VALUES ('x', 1999, 7.5, 'Sci-Fi'), ('y', 2001, 8, 'Drama')`)
  t.same(await keysOf('movies'), ['', ...['Sci-Fi', 'Drama'].map(keyOf(MOVIE_KEYS.genre)), ...[1999, 2001].map(keyOf(MOVIE_KEYS.year))].sort(),
    'movies: the total, each genre and year')
})

t.test('a create writes one counter row per key and bucket a reader reads', async (t) => {
  const [author] = await rows<{ id: number }>(sql`INSERT INTO users (subject_id, role) VALUES ('keys-carol', 'User') RETURNING id::float8 AS id`)
  // Rows written in this transaction carry its id as xmin, inserted and updated alike.
  const written = async (insert: SQL): Promise<number> => await db.transaction(async (tx) => {
    await tx.execute(insert)
    const [row] = await queryRows<{ n: number }>(tx as unknown as Database, sql`SELECT count(*)::int AS n FROM pagination_counts WHERE xmin = pg_current_xact_id()::xid`)
    return row!.n
  })
  // '' and the priority: the total and three levels of id and of time buckets each (14); the author's
  // total (1); the subject's, or no subject's, total and three levels of id buckets (4).
  t.equal(await written(sql`INSERT INTO messages (content, subject, author_id) VALUES ('one', 'Ops', ${author!.id})`), 19, 'with a subject: 19')
  t.equal(await written(sql`INSERT INTO messages (content, author_id) VALUES ('one', ${author!.id})`), 19, 'without one: 19')
})

t.test('after inserts, a bulk insert, an update and a delete, every counter is the count of its rows', async (t) => {
  const [author] = await rows<{ id: number }>(sql`INSERT INTO users (subject_id, role) VALUES ('keys-dave', 'User') RETURNING id::float8 AS id`)
  await db.execute(sql`INSERT INTO messages (content, subject, priority, author_id)
    SELECT 'bulk ' || g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'subject ' || (g % 5) END,
      (ARRAY['low', 'normal', 'high', 'urgent'])[1 + g % 4]::message_priority, ${author!.id}
    FROM generate_series(1, 600) g`)
  await db.execute(sql`UPDATE messages SET subject = NULL, priority = 'urgent' WHERE content IN ('bulk 3', 'bulk 10')`)
  await db.execute(sql`UPDATE messages SET subject = 'moved' WHERE content = 'bulk 14'`)
  await db.execute(sql`DELETE FROM messages WHERE content IN ('bulk 5', 'bulk 300', 'one')`)

  // The counters as the readers read them, each the sum of its slots.
  const counted = new Map((await rows<{ key: string, dim: string, bucket: string, n: string }>(sql`SELECT key, dim, bucket::text AS bucket, sum(n)::text AS n
    FROM pagination_counts WHERE table_name = 'messages' GROUP BY 1, 2, 3 HAVING sum(n) <> 0`)).map((r) => [`${r.key}|${r.dim}|${r.bucket}`, Number(r.n)]))
  // The same, counted here from the rows, with the builders' keys.
  const expected = new Map<string, number>()
  const add = (key: string, dim: string, bucket: bigint): void => {
    const at = `${key}|${dim}|${bucket}`
    expected.set(at, (expected.get(at) ?? 0) + 1)
  }
  const filters = MESSAGE_COLLECTION.filters
  for (const m of await rows<{ id: string, priority: string, subject: string | null, author: string, tb: string }>(sql`SELECT id::text AS id, priority::text AS priority,
    subject, author_id::text AS author, pagination_time_bucket(created_at)::text AS tb FROM messages`)) {
    const i = BigInt(m.id) >> 8n
    for (const key of ['', filters.priority.key!(m.priority)]) {
      add(key, 'total', 0n)
      for (let level = 0n; level < BigInt(BUCKET_LEVELS); level++) {
        add(key, `id:${level}`, i >> (8n * level))
        add(key, `created:${level}`, BigInt(m.tb) >> (8n * level))
      }
    }
    add(filters.authorId.key!(Number(m.author)), 'total', 0n)
    const subject = m.subject === null ? MESSAGE_KEYS.subject.none : filters.subject.key!(m.subject)
    add(subject, 'total', 0n)
    for (let level = 0n; level < BigInt(BUCKET_LEVELS); level++) add(subject, `id:${level}`, i >> (8n * level))
  }
  t.same(Object.fromEntries([...counted].sort()), Object.fromEntries([...expected].sort()), 'every key, dimension and bucket')
})
