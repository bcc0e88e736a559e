import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { buildApp, type App } from '../../src/app.js'
import { testConfig } from '../helpers/build.js'
import { buildWithUrl } from '../helpers/exactness.js'
import { createAuthor, queryRows } from '../helpers/fixtures.js'
import { cursorKinds, pageBody, pagination } from '../helpers/pagination.js'
import { startPgCluster } from '../../scripts/postgres/throwaway-cluster.js'

// The counters behind totals and deep pages (drizzle/0006), the grouped writes, and the page cache,
// seen from outside: whatever writes, through the API or by SQL, the next read is exact.

const start = async () => buildWithUrl(t)

const as = (sub: string) => ({ 'x-test-user': JSON.stringify({ sub, role: 'User', name: `Name of ${sub}` }) })

async function get (app: App, url: string): Promise<{ status: number, body: any }> {
  const res = await app.inject({ method: 'GET', url })
  return { status: res.statusCode, body: res.json() }
}

async function count (app: App, where = sql`true`): Promise<number> {
  const [row] = await queryRows<{ n: number }>(app.db, sql`select count(*)::int as n from messages where ${where}`)
  return row?.n ?? -1
}

const empty = (limit = 25) => pageBody([], 1, limit, 0)

t.test('the counters are split by slot: the writers\' counts are in no index, the folded ones in one (drizzle/0019)', async (t) => {
  const { app } = await start()
  const indexes = await queryRows<{ partition: string, def: string }>(app.db, sql`
    select c.relname as partition, regexp_replace(pg_get_indexdef(i.indexrelid), '^.* USING btree ', '') as def
    from pg_inherits h join pg_class c on c.oid = h.inhrelid join pg_index i on i.indrelid = c.oid
    where h.inhparent = 'pagination_counts'::regclass order by 1, 2`)
  t.same(indexes, [
    { partition: 'pagination_counts_folded', def: '(table_name, key, dim, bucket, slot) INCLUDE (n)' },
    { partition: 'pagination_counts_written', def: '(table_name, key, dim, bucket, slot)' }
  ], 'a writer\'s update changes no indexed column, so it is heap-only; a located page reads folded counts from the index')
  const [author] = await queryRows<{ id: number }>(app.db, sql`insert into users (subject_id, role) values ('split-erin', 'User') returning id::float8 as id`)
  await app.db.execute(sql`insert into messages (content, author_id) select 'split ' || g, ${author!.id} from generate_series(1, 30) g`)
  const where = sql`table_name = 'messages' and key = '' and dim = 'total'`
  const slots = async () => await queryRows<{ folded: boolean, n: number }>(app.db, sql`select slot = 0 as folded, sum(n)::int as n from pagination_counts where ${where} group by 1 order by 1`)
  const before = await slots()
  t.ok(before.some((row) => !row.folded && row.n >= 30), 'a create counts in its writer\'s slot')
  await app.db.execute(sql`select pagination_compact()`)
  const after = await slots()
  t.same(after, [{ folded: true, n: before.reduce((sum, row) => sum + row.n, 0) }], 'compaction moves every slot into the folded partition, the sum kept')
})

t.test('a valid number that matches nothing is an empty page, not an error (SPEC 4.9 rule 2)', async (t) => {
  const { app } = await start()
  for (const query of ['minRating=1000000', 'minRating=10.01', 'year=3000', 'year=-5', 'year=0', 'year=1994.5', 'year=1e20', 'year=99999999999']) {
    t.same(await get(app, `/v2/movies?${query}`), { status: 200, body: empty() }, `/v2/movies?${query}`)
  }
  for (const query of ['authorId=0', 'authorId=-5', 'authorId=1.5', 'authorId=1e20', 'authorId=9007199254740993', 'authorId=999999']) {
    t.same(await get(app, `/v2/messages?${query}`), { status: 200, body: empty() }, `/v2/messages?${query}`)
    t.same(await get(app, `/v2/messages/search?q=x&${query}`), { status: 200, body: empty() }, `/v2/messages/search?q=x&${query}`)
  }
  // The other end of each range: everything.
  const all = await get(app, '/v2/movies?minRating=-5&limit=100')
  t.equal(all.body.pagination.total, 54, 'minRating=-5: every movie')
  t.equal((await get(app, '/v2/movies?minRating=0')).body.pagination.total, 54, 'minRating=0: every movie')
  t.equal((await get(app, '/v2/movies?year=1994')).body.pagination.total, 4, 'year=1994 still matches')
  // Not a number: still 400.
  t.same(await get(app, '/v2/movies?year=abc'), { status: 400, body: { error: 'Validation failed', details: ['year must be a number'] } }, 'year=abc: 400')
  t.same(await get(app, '/v2/messages?authorId=abc'), { status: 400, body: { error: 'Validation failed', details: ['authorId must be a number'] } }, 'authorId=abc: 400')
})

t.test('concurrent creates are grouped, and every one is answered with its own committed row', async (t) => {
  const { app } = await start()
  for (let i = 0; i < 10; i++) await createAuthor(app, `known-${i}`)
  const requests = Array.from({ length: 150 }, (_, i) => ({
    sub: i % 3 === 0 ? `new-${i % 20}` : `known-${i % 10}`,
    content: `message ${i}`,
    priority: (['low', 'normal', 'high', 'urgent'] as const)[i % 4]
  }))
  const responses = await Promise.all(requests.map(async (r) => app.inject({
    method: 'POST', url: '/v2/messages', headers: as(r.sub), payload: { content: r.content, priority: r.priority, subject: `s${r.content.length}` }
  })))
  t.same(responses.map((r) => r.statusCode), Array(150).fill(201), 'all 150: 201')
  const bodies = responses.map((r) => r.json())
  t.equal(new Set(bodies.map((b) => b.id)).size, 150, 'each got its own id')
  const rows = await queryRows<{ id: number, content: string, priority: string, sub: string }>(app.db,
    sql`select m.id::int as id, m.content, m.priority::text as priority, u.subject_id as sub from messages m join users u on u.id = m.author_id`)
  const byId = new Map(rows.map((r) => [r.id, r]))
  t.equal(rows.length, 150, '150 rows, no more')
  t.ok(bodies.every((b, i) => {
    const row = byId.get(b.id)
    return row !== undefined && row.content === requests[i]!.content && row.priority === requests[i]!.priority && row.sub === requests[i]!.sub &&
      b.content === requests[i]!.content && b.author.name === `Name of ${requests[i]!.sub}`
  }), 'every response is the row committed for that request, with its author')
  const [users] = await queryRows<{ n: number }>(app.db, sql`select count(*)::int as n from users where subject_id like 'new-%'`)
  t.equal(users?.n, 20, 'each new subject provisioned once')
  t.equal((await get(app, '/v2/messages?limit=1')).body.pagination.total, 150, 'the total counts them all')
  t.equal((await get(app, '/v2/messages?priority=urgent&limit=1')).body.pagination.total, await count(app, sql`priority = 'urgent'`), 'and the per-priority total')
})

t.test('the next read after any write is exact: SQL writes, cached pages, compaction', async (t) => {
  const { app } = await start()
  const alice = await createAuthor(app, 'alice', { name: 'Alice' })
  for (let i = 0; i < 30; i++) {
    await app.inject({ method: 'POST', url: '/v2/messages', headers: as('alice'), payload: { content: `hello ${i}`, priority: i % 2 === 0 ? 'high' : 'low' } })
  }
  const first = await get(app, '/v2/messages?limit=5&page=3')
  t.equal(first.body.data[0].author.name, 'Alice', 'the author name as stored')
  t.same(await get(app, '/v2/messages?limit=5&page=3'), first, 'the same page again')

  await app.db.execute(sql`update users set name = 'Alice Renamed' where id = ${alice.id}`)
  t.equal((await get(app, '/v2/messages?limit=5&page=3')).body.data[0].author.name, 'Alice Renamed', 'a rename by SQL shows on the next read of a page read before')

  await app.db.execute(sql`delete from messages where content in ('hello 10', 'hello 11', 'hello 12')`)
  const after = await get(app, '/v2/messages?limit=5&page=3')
  t.same(after.body.data.map((m: { content: string }) => m.content), ['hello 13', 'hello 14', 'hello 15', 'hello 16', 'hello 17'], 'a delete by SQL moves the page')
  t.equal(after.body.pagination.total, 27, 'and the total')

  await app.db.execute(sql`update messages set priority = 'urgent' where content like 'hello 2%'`)
  t.equal((await get(app, '/v2/messages?priority=urgent')).body.pagination.total, await count(app, sql`priority = 'urgent'`), 'an update by SQL moves rows between filter totals')
  t.equal((await get(app, '/v2/messages/search?q=HELLO 2')).body.pagination.total, 11, 'search sees the new state (hello 2, hello 20..29)')
  await app.db.execute(sql`update messages set content = 'changed' where content = 'hello 25'`)
  t.equal((await get(app, '/v2/messages/search?q=HELLO 2')).body.pagination.total, 10, 'a content change by SQL leaves the search result at once')

  const before = await queryRows<{ key: string, n: number }>(app.db,
    sql`select key, dim, bucket, sum(n)::int as n from pagination_counts group by 1, 2, 3 having sum(n) <> 0 order by 1, 2, 3`)
  await app.db.execute(sql`select pagination_compact()`)
  const compacted = await queryRows<{ key: string, n: number }>(app.db,
    sql`select key, dim, bucket, sum(n)::int as n from pagination_counts group by 1, 2, 3 having sum(n) <> 0 order by 1, 2, 3`)
  t.same(compacted, before, 'compaction keeps every counter sum')
  const [slots] = await queryRows<{ n: number }>(app.db, sql`select count(*)::int as n from pagination_counts where slot <> 0`)
  t.equal(slots?.n, 0, 'and folds every writer slot')
  t.equal((await get(app, '/v2/messages')).body.pagination.total, await count(app), 'the total after compaction')

  // A load that bypassed the triggers, then recounted.
  await app.db.execute(sql`alter table messages disable trigger messages_pagination_insert`)
  await app.db.execute(sql`insert into messages (content, priority, author_id) select 'untracked ' || g, 'urgent', ${alice.id} from generate_series(1, 40) g`)
  await app.db.execute(sql`alter table messages enable trigger messages_pagination_insert`)
  await app.db.execute(sql`select pagination_rebuild()`)
  t.equal((await get(app, '/v2/messages')).body.pagination.total, await count(app), 'pagination_rebuild() recounts rows that bypassed the triggers')
  t.equal((await get(app, '/v2/messages?priority=urgent')).body.pagination.total, await count(app, sql`priority = 'urgent'`), 'per filter value too')
  t.same((await get(app, '/v2/messages?page=13&limit=5&sort=createdAt&order=desc')).body.data.map((m: { id: number }) => m.id),
    (await queryRows<{ id: number }>(app.db, sql`select id::int as id from messages order by created_at desc, id limit 5 offset 60`)).map((r) => r.id),
    'and the deep pages located through its buckets')

  await app.db.execute(sql`truncate messages`)
  t.same(await get(app, '/v2/messages'), { status: 200, body: empty() }, 'after TRUNCATE: empty, whatever was cached')
})

/**
 * An app on PostgreSQL, where two clients can hold transactions at once: the server under test when
 * TEST_DATABASE_URL is set, else a throwaway server of the machine's own binaries (PGlite has one
 * embedded connection, so the property below cannot arise there).
 */
async function onServer (t: Test): Promise<{ app: App, url: string }> {
  const server = process.env.TEST_DATABASE_URL
  if (server !== undefined && server !== '') return start()
  const cluster = await startPgCluster({ replica: false })
  t.teardown(() => cluster.stop())
  const app = await buildApp(testConfig({ databaseUrl: cluster.primaryUrl() }), { logger: false, testAuth: true })
  t.teardown(() => app.close())
  return { app, url: cluster.primaryUrl() }
}

t.test('another client\'s open bulk load on PostgreSQL does not hold up API writes', async (t) => {
  const { app, url } = await onServer(t)
  await createAuthor(app, 'bulk')
  await createAuthor(app, 'api')
  const bulk = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => bulk.end())
  const reserved = await bulk.reserve()
  await reserved`begin`
  await reserved`insert into messages (content, priority, author_id) select 'bulk ' || g, 'high', (select id from users where subject_id = 'bulk') from generate_series(1, 2000) g`

  // Whether the write waits for the open load is read from the server, not from a clock: while it is
  // pending, a watcher looks for a backend waiting on a lock, and if it finds one commits the load,
  // so that the test fails instead of hanging.
  const watcher = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => watcher.end())
  const state = { pending: true, waited: false }
  const posting = app.inject({ method: 'POST', url: '/v2/messages', headers: as('api'), payload: { content: 'while the load is open', priority: 'high' } })
    .finally(() => { state.pending = false })
  while (state.pending && !state.waited) {
    const [row] = await watcher<Array<{ n: number }>>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`
    if ((row?.n ?? 0) > 0) {
      state.waited = true
      await reserved`commit`
    } else {
      await sleep(5)
    }
  }
  const res = await posting
  t.equal(res.statusCode, 201, 'the API write is answered while the other transaction is open')
  t.notOk(state.waited, 'without waiting for it')
  t.equal((await get(app, '/v2/messages?priority=high')).body.pagination.total, 1, 'uncommitted rows are not counted')

  await reserved`commit`
  reserved.release()
  t.equal((await get(app, '/v2/messages?priority=high')).body.pagination.total, 2001, 'committed, they are')
  const last = await get(app, '/v2/messages?page=81&limit=25')
  t.same(last.body.data.map((m: { content: string }) => m.content), ['while the load is open'], 'the last page is exact: the API row came after the load\'s ids')
  t.same(cursorKinds(last.body).pagination, pagination(81, 25, 2001, 1), 'with its pagination')
  t.equal((await get(app, '/v2/messages?page=80&limit=25')).body.data.at(-1)?.content, 'bulk 2000', 'and the page before it')
})
