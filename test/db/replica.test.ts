import t from 'tap'
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import { buildApp, type App } from '../../src/app.js'
import { startPgCluster, waitForReplay } from '../../scripts/postgres/throwaway-cluster.js'
import type { Database } from '../../src/db/client.js'
import type { ReadHandles } from '../../src/db/read-router.js'
import { testConfig } from '../helpers/build.js'

// CONTRACT 11 against a real streaming replica: a throwaway primary and replica of the machine's
// own PostgreSQL binaries, whether or not TEST_DATABASE_URL is set.
const DATABASE = 'messages'

/** A read as a repository makes one: on the handle picked, and once more on its fallback when it fails. */
async function readOn<T> (handles: ReadHandles, read: (db: Database) => Promise<T>): Promise<T> {
  const on = handles.pick()
  try {
    return await read(on.db)
  } catch (err) {
    return await read(on.fallback(err))
  }
}
const alice = { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User', name: 'Alice' }) }

interface Page { data: Array<{ id: number, content: string }>, pagination: { total: number, totalPages: number } }

async function list (app: App, query = ''): Promise<{ status: number, body: Page }> {
  const res = await app.inject({ url: `/v2/messages${query}` })
  return { status: res.statusCode, body: res.json() }
}

async function post (app: App, content: string, headers: Record<string, string> = alice): Promise<number> {
  const res = await app.inject({ method: 'POST', url: '/v2/messages', headers, payload: { content, subject: 'replica' } })
  if (res.statusCode !== 201) throw new Error(`POST /v2/messages: ${res.statusCode} ${res.body}`)
  return res.json<{ id: number }>().id
}

async function pauseReplay (replica: postgres.Sql): Promise<void> {
  await replica`select pg_wal_replay_pause()`
  for (let i = 0; i < 100; i++) {
    const [{ state }] = await replica`select pg_get_wal_replay_pause_state() as state` as unknown as [{ state: string }]
    if (state === 'paused') return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error('replay did not pause')
}

t.test('reads from a streaming replica, writes to the primary, and a dead replica never fails a read', async (t) => {
  const cluster = await startPgCluster({ replica: true })
  t.teardown(() => cluster.stop())
  const admin = postgres(cluster.primaryUrl(), { max: 1, onnotice: () => {} })
  t.teardown(() => admin.end())
  await admin.unsafe(`create database ${DATABASE}`)

  const primaryUrl = cluster.primaryUrl(DATABASE)
  const replicaUrl = cluster.replicaUrl(DATABASE)
  await waitForReplay(cluster.primaryUrl(), cluster.replicaUrl())
  const primary = postgres(primaryUrl, { max: 1, onnotice: () => {} })
  const replica = postgres(replicaUrl, { max: 1, onnotice: () => {} })
  t.teardown(() => Promise.all([primary.end(), replica.end()]))

  const app = await buildApp(testConfig({ databaseUrl: primaryUrl, databaseReadUrls: [replicaUrl] }), { logger: false, testAuth: true })
  t.teardown(() => app.close())
  const [{ recovery }] = await replica`select pg_is_in_recovery() as recovery` as unknown as [{ recovery: boolean }]
  t.equal(recovery, true, 'the replica is a hot standby, not a copy')

  const first = await post(app, 'before the pause')
  await waitForReplay(primaryUrl, replicaUrl)
  t.match(await list(app), { status: 200, body: { data: [{ id: first }], pagination: { total: 1 } } })

  await t.test('reads come from the replica: a paused replay hides a new message until it resumes', async (t) => {
    await pauseReplay(replica)
    const second = await post(app, 'written while the replica is paused')

    const [onPrimary] = await primary`select count(*)::int as n from messages where id = ${second}` as unknown as [{ n: number }]
    const [onReplica] = await replica`select count(*)::int as n from messages where id = ${second}` as unknown as [{ n: number }]
    t.same([onPrimary.n, onReplica.n], [1, 0], 'the write went to the primary and has not reached the paused replica')

    const paused = await list(app)
    t.equal(paused.status, 200)
    t.same(paused.body.data.map((m) => m.id), [first], 'the page is the replica\'s')
    t.equal(paused.body.pagination.total, 1, 'so is the total')
    t.equal((await app.inject({ url: `/v2/messages/${second}` })).statusCode, 404, 'GET by id reads the replica')
    const search = await app.inject({ url: '/v2/messages/search?q=paused' })
    t.match({ status: search.statusCode, body: search.json() }, { status: 200, body: { data: [], pagination: { total: 0 } } }, 'search reads the replica')

    await replica`select pg_wal_replay_resume()`
    await waitForReplay(primaryUrl, replicaUrl)
    const resumed = await list(app, '?sort=id&order=asc')
    t.same(resumed.body.data.map((m) => m.id), [first, second], 'after replay the new message is listed')
    t.equal(resumed.body.pagination.total, 2)
    t.match((await app.inject({ url: `/v2/messages/${second}` })).json(), { id: second, content: 'written while the replica is paused' })
  })

  await t.test('a delete finds and deletes its message on the primary: a replica behind never makes it absent', async (t) => {
    const bob = { 'x-test-user': JSON.stringify({ sub: 'bob', role: 'User', name: 'Bob' }) }
    const moderator = { 'x-test-user': JSON.stringify({ sub: 'mia', role: 'Moderator', name: 'Mia' }) }
    await pauseReplay(replica)
    const own = await post(app, 'deleted by its author while the replica is paused')
    const others = await post(app, 'not bob\'s to delete')
    t.equal((await app.inject({ url: `/v2/messages/${own}` })).statusCode, 404, 'sanity: the paused replica has not seen them')

    const del = async (id: number, headers: Record<string, string>) => {
      const res = await app.inject({ method: 'DELETE', url: `/v2/messages/${id}`, headers })
      return { status: res.statusCode, body: res.body }
    }
    t.same(await del(own, alice), { status: 204, body: '' }, 'the author deletes a message only the primary holds')
    t.same(await del(others, bob), { status: 403, body: JSON.stringify({ error: 'Insufficient permissions' }) }, 'another User: 403, not 404')
    t.same(await del(own, alice), { status: 404, body: JSON.stringify({ error: 'Message not found' }) }, 'deleted: 404')
    t.same(await del(2_000_000_000, bob), { status: 404, body: JSON.stringify({ error: 'Message not found' }) }, 'never existed: 404')
    const [{ n }] = await primary`select count(*)::int as n from messages where id = ${others}` as unknown as [{ n: number }]
    t.equal(n, 1, 'the 403 deleted nothing')
    t.same(await del(others, moderator), { status: 204, body: '' }, 'a Moderator deletes it')
    const [{ left }] = await primary`select count(*)::int as left from messages where id in (${own}, ${others})` as unknown as [{ left: number }]
    t.equal(left, 0, 'both are gone from the primary')

    // Another client deletes the row while this delete waits for its lock: the loser sees it gone.
    const raced = await post(app, 'deleted by another client while the API waits')
    let waiting: Promise<{ status: number, body: string }> | undefined
    await primary.begin(async (tx) => {
      await tx`select id from messages where id = ${raced} for update`
      waiting = del(raced, alice)
      for (let i = 0; i < 100; i++) {
        const [{ blocked }] = await admin`select count(*)::int as blocked from pg_stat_activity
          where datname = ${DATABASE} and wait_event_type = 'Lock'` as unknown as [{ blocked: number }]
        if (blocked > 0) break
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      await tx`delete from messages where id = ${raced}`
    })
    t.same(await waiting, { status: 404, body: JSON.stringify({ error: 'Message not found' }) }, 'a delete that lost the race: 404, not 403')

    await replica`select pg_wal_replay_resume()`
    await waitForReplay(primaryUrl, replicaUrl)
    t.equal((await app.inject({ url: `/v2/messages/${others}` })).statusCode, 404, 'and from the replica once it replays')
  })

  await t.test('totals on the replica are exact once it has caught up', async (t) => {
    const [{ userId }] = await primary`select id as "userId" from users where subject_id = 'alice'` as unknown as [{ userId: number }]
    // A bulk load by another SQL client, straight into the primary.
    await primary`insert into messages (content, subject, priority, author_id)
      select 'bulk ' || g, case when g % 3 = 0 then 'third' else null end,
             (array['low','normal','high','urgent'])[1 + g % 4]::message_priority, ${userId}
      from generate_series(1, 437) g`
    await primary`delete from messages where content like 'bulk %' and id % 7 = 0`
    await waitForReplay(primaryUrl, replicaUrl)

    const expected = async (where: string): Promise<number> => {
      const [row] = await primary.unsafe(`select count(*)::int as n from messages ${where}`) as unknown as [{ n: number }]
      return row.n
    }
    const cases: Array<[string, string]> = [
      ['', ''],
      ['?priority=urgent', "where priority = 'urgent'"],
      ['?subject=third', "where subject = 'third'"]
    ]
    for (const [query, where] of cases) {
      const total = await expected(where)
      const page = await list(app, `${query === '' ? '?' : `${query}&`}limit=100&page=${Math.ceil(total / 100)}`)
      t.equal(page.status, 200)
      t.equal(page.body.pagination.total, total, `total of /v2/messages${query}`)
      t.equal(page.body.data.length, total - 100 * (Math.ceil(total / 100) - 1), `last page of /v2/messages${query}`)
    }
  })

  await t.test('delta sync reads the replica and is exact for its snapshot, even when transactions commit out of order', async (t) => {
    // The client's copy, kept the way an offline app keeps it.
    const copy = new Map<number, unknown>()
    let next: string | undefined
    const sync = async (): Promise<Array<{ op: string, id: number }>> => {
      const seen: Array<{ op: string, id: number }> = []
      for (;;) {
        const res = await app.inject({ url: `/v2/messages/changes?limit=50${next === undefined ? '' : `&since=${next}`}` })
        t.equal(res.statusCode, 200)
        const body = res.json<{ data: Array<{ op: string, id: number, message?: unknown }>, next: string, hasMore: boolean }>()
        for (const entry of body.data) {
          if (entry.op === 'upsert') copy.set(entry.id, entry.message)
          else copy.delete(entry.id)
          seen.push({ op: entry.op, id: entry.id })
        }
        next = body.next
        if (!body.hasMore) return seen
      }
    }
    const assertCopyIsThePrimary = async (label: string) => {
      await waitForReplay(primaryUrl, replicaUrl)
      await sync()
      const rows = await primary`select id::float8 as id, content from messages order by id` as unknown as Array<{ id: number, content: string }>
      t.same([...copy.keys()].sort((a, b) => a - b), rows.map((r) => r.id), `${label}: the same ids as the primary`)
      t.same(rows.map((r) => (copy.get(r.id) as { content: string }).content), rows.map((r) => r.content), `${label}: the same content`)
    }

    await assertCopyIsThePrimary('initial copy')

    await pauseReplay(replica)
    const created = await post(app, 'written while the feed reads a paused replica')
    await primary`update messages set content = 'edited on the primary' where id = (select min(id) from messages)`
    t.same(await sync(), [], 'the paused replica has not seen them: the feed is the replica\'s')
    await replica`select pg_wal_replay_resume()`
    await waitForReplay(primaryUrl, replicaUrl)
    t.ok((await sync()).some((e) => e.op === 'upsert' && e.id === created), 'once replayed, the feed brings them')
    await assertCopyIsThePrimary('after the pause')

    // T1 begins and writes first, T2 begins after it and commits first. The replica knows T1 is still
    // running, so the feed waits for it rather than passing its position.
    const t1 = postgres(primaryUrl, { max: 1, onnotice: () => {} })
    const t2 = postgres(primaryUrl, { max: 1, onnotice: () => {} })
    t.teardown(() => Promise.all([t1.end(), t2.end()]))
    const [{ userId }] = await primary`select id as "userId" from users where subject_id = 'alice'` as unknown as [{ userId: number }]
    let releaseT1: () => void = () => {}
    const t1Done = t1.begin(async (tx) => {
      await tx`insert into messages (content, author_id) values ('T1, begun first, committed last', ${userId})`
      await new Promise<void>((resolve) => { releaseT1 = resolve })
    })
    // T1 has written and waits, open.
    while ((await admin`select count(*)::int as n from pg_stat_activity where datname = ${DATABASE} and state = 'idle in transaction'` as unknown as [{ n: number }])[0].n === 0) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await t2.begin(async (tx) => {
      await tx`insert into messages (content, author_id) values ('T2, begun last, committed first', ${userId})`
      await tx`delete from messages where id = ${created}`
    })
    await waitForReplay(primaryUrl, replicaUrl)
    for (let i = 0; i < 5; i++) await sync()
    releaseT1()
    await t1Done
    await assertCopyIsThePrimary('after T2 then T1 committed')
    t.notOk(copy.has(created), 'the delete T2 made is applied')
    t.ok([...copy.values()].some((m) => (m as { content: string }).content === 'T1, begun first, committed last'), 'T1\'s message arrived after all')
  })

  await t.test('a step the replica cannot perform, such as a write inside a read, runs on the primary', async (t) => {
    const servedBy = await readOn(app.readDb, async (db) => {
      await db.execute(sql`create temporary table scratch (n int)`)
      const rows = await db.execute<{ recovery: boolean }>(sql`select pg_is_in_recovery() as recovery`) as unknown as Array<{ recovery: boolean }>
      return rows[0]?.recovery
    })
    t.equal(servedBy, false, 'the hot standby refused the write; the primary served the read')
    t.equal(await readOn(app.readDb, async (db) => {
      const rows = await db.execute<{ recovery: boolean }>(sql`select pg_is_in_recovery() as recovery`) as unknown as Array<{ recovery: boolean }>
      return rows[0]?.recovery
    }), true, 'and the replica still serves the next read')
  })

  await t.test('reads survive a stopped replica; writes are unaffected', async (t) => {
    const [{ n: total }] = await primary`select count(*)::int as n from messages` as unknown as [{ n: number }]
    cluster.stopReplica()
    for (let i = 0; i < 3; i++) {
      const page = await list(app)
      t.equal(page.status, 200, `read ${i + 1} after the replica stopped`)
      t.equal(page.body.pagination.total, total)
    }
    t.equal((await app.inject({ url: '/v2/messages/search?q=bulk' })).statusCode, 200)
    const id = await post(app, 'after the replica stopped')
    t.match((await app.inject({ url: `/v2/messages/${id}` })).json(), { id, content: 'after the replica stopped' }, 'read from the primary at once')
    t.equal((await list(app)).body.pagination.total, total + 1)
    t.same((await app.inject({ url: '/health/ready' })).json(), { ok: true }, 'readiness follows the primary only')
  })
})
