import { request as httpRequest, type IncomingMessage } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { buildApp, type App } from '../../../src/app.js'
import { startFailoverCluster, type FailoverCluster, type ServerName } from '../../../scripts/postgres/failover-cluster.js'
import { testConfig } from '../../helpers/build.js'
import { SyncClient, differences, type SyncMessage } from '../../helpers/sync-client.js'

// CONTRACT 14 from outside: the service on a multi-host URL naming a throwaway primary a and its
// standby b (scripts/postgres/failover-cluster.ts), whether or not TEST_DATABASE_URL is set. The
// primary is killed and the standby promoted under load; what the service answers meanwhile and
// afterwards is checked against what the new primary holds, by SQL.

const DATABASE = 'messages'
const ALICE = { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User', name: 'Alice' }) }
const UNAVAILABLE = { error: 'Service unavailable' }
const DB_UNAVAILABLE = { error: 'Database unavailable' }
const EXPIRED = { error: 'Sync token expired' }
const NOT_FOUND = { error: 'Message not found' }

interface Answer { status: number, headers: Record<string, string | string[] | number | undefined>, body: unknown, text: string }
interface Page { data: Array<{ id: number, content: string }>, pagination: { total: number, totalPages: number } }

async function withDeadline<T> (what: string, promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([promise, new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => { reject(new Error(`${what}: no answer within ${ms} ms (a hang)`)) }, ms)
    })])
  } finally {
    clearTimeout(timer)
  }
}

async function call (app: App, options: { method?: 'GET' | 'POST', url: string, headers?: Record<string, string>, payload?: object }): Promise<Answer> {
  const res = await withDeadline(`${options.method ?? 'GET'} ${options.url}`, app.inject({ method: options.method ?? 'GET', url: options.url, headers: options.headers, payload: options.payload }), 15_000)
  let body: unknown
  try { body = res.json() } catch { body = undefined }
  return { status: res.statusCode, headers: res.headers, body, text: res.body }
}

async function post (app: App, content: string, key?: string): Promise<Answer> {
  return await call(app, { method: 'POST', url: '/v2/messages', headers: key === undefined ? ALICE : { ...ALICE, 'idempotency-key': key }, payload: { content, subject: 'failover' } })
}

/** A GET retried while it answers 503 (the first request after a promotion), for up to `ms`. */
async function getRetrying (app: App, url: string, headers: Record<string, string> = {}, ms = 10_000): Promise<Answer> {
  const deadline = Date.now() + ms
  for (;;) {
    const res = await call(app, { url, headers })
    if (res.status !== 503 || Date.now() > deadline) return res
    await sleep(250)
  }
}

/** A POST retried (same key) while it answers 503, up to `ms`. */
async function postRetrying (app: App, content: string, key: string, ms = 10_000): Promise<Answer> {
  const deadline = Date.now() + ms
  for (;;) {
    const res = await post(app, content, key)
    if (res.status !== 503 || Date.now() > deadline) return res
    await sleep(250)
  }
}

/** Every page of GET /v2/messages in id order: the ids listed, and the totals each page reported. */
async function listAll (app: App): Promise<{ ids: number[], totals: number[], statuses: number[] }> {
  const ids: number[] = []
  const totals: number[] = []
  const statuses: number[] = []
  for (let page = 1; page < 1000; page++) {
    const res = await call(app, { url: `/v2/messages?sort=id&order=asc&limit=100&page=${page}` })
    statuses.push(res.status)
    if (res.status !== 200) break
    const body = res.body as Page
    ids.push(...body.data.map((m) => m.id))
    totals.push(body.pagination.total)
    if (page >= body.pagination.totalPages) break
  }
  return { ids, totals, statuses }
}

async function tableIds (cluster: FailoverCluster, name: ServerName): Promise<number[]> {
  const rows = await cluster.query<{ id: number }>(name, 'select id::int as id from messages order by id', DATABASE)
  return rows.map((row) => row.id)
}

async function count (cluster: FailoverCluster, name: ServerName, where = 'true'): Promise<number> {
  const [row] = await cluster.query<{ n: number }>(name, `select count(*)::int as n from messages where ${where}`, DATABASE)
  return row?.n ?? -1
}

/** Every message as GET /v2/messages/{id} renders it, read by SQL on one server, in id order. */
async function servedBy (cluster: FailoverCluster, name: ServerName): Promise<SyncMessage[]> {
  const rows = await cluster.query<{ id: number, content: string, subject: string | null, priority: string, author_id: number, author_name: string | null, created_at: string }>(name,
    `select m.id::int as id, m.content, m.subject, m.priority::text as priority, u.id::int as author_id, u.name as author_name,
            to_char(m.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as created_at
       from messages m join users u on u.id = m.author_id order by m.id`, DATABASE)
  return rows.map((r) => ({ id: r.id, content: r.content, subject: r.subject, priority: r.priority, author: { id: r.author_id, name: r.author_name }, createdAt: r.created_at }))
}

/** Calls until an answer says hasMore: false. */
async function follow (client: SyncClient): Promise<void> {
  for (let n = 0; n < 1000; n++) if (!(await client.call()).hasMore) return
  throw new Error('the feed never said hasMore: false')
}

async function changes (app: App, since: string): Promise<Answer> {
  return await call(app, { url: `/v2/messages/changes?since=${since}&limit=1000` })
}

async function cluster (t: Test, synchronous: boolean): Promise<FailoverCluster> {
  const started = await startFailoverCluster({ synchronous })
  t.teardown(() => started.stop())
  await started.query('a', `create database ${DATABASE}`)
  await started.waitStreaming()
  return started
}

async function app (t: Test, failover: FailoverCluster): Promise<App> {
  const built = await buildApp(testConfig({ databaseUrl: failover.url(DATABASE) }), { logger: false, testAuth: true })
  t.teardown(() => built.close())
  // The migrations the app ran on a are on b before anything is killed.
  await failover.waitReplayed()
  return built
}

async function seed (t: Test, service: App, n: number, prefix: string): Promise<number[]> {
  const ids: number[] = []
  for (let i = 0; i < n; i++) {
    const res = await post(service, `${prefix} ${i}`)
    t.equal(res.status, 201, `seed ${prefix} ${i}: 201`)
    ids.push((res.body as { id: number }).id)
  }
  return ids
}

t.test('1. synchronous replication: the primary is killed under idempotent writes, the standby promoted', async (t) => {
  const failover = await cluster(t, true)
  const service = await app(t, failover)
  await seed(t, service, 5, 'seed')

  const client = new SyncClient(service, 100)
  await follow(client)
  const t0 = client.next ?? ''
  const copyAtT0 = new Map(client.copy)
  t.equal(copyAtT0.size, 5, 'the sync copy holds the seed')
  const before = await call(service, { url: '/v2/messages?limit=5' })
  t.equal(before.status, 200)
  const oldEtag = String(before.headers.etag)

  // The load: 4 workers, 60 keys, each retried with its key on 503 (and only then).
  const KEYS = 60
  const WORKERS = 4
  const MAX_TRIES = 80
  const keys = Array.from({ length: KEYS }, (_, i) => `failover-key-${i}`)
  const created = new Map<string, { id: number, at: number, tries: number, replayed: boolean }>()
  const unexpected: Array<{ key: string, status: number, body: string }> = []
  const badRetry: string[] = []
  const gaveUp: string[] = []
  let retried = 0
  let next = 0
  async function worker (): Promise<void> {
    for (;;) {
      const key = keys[next++]
      if (key === undefined) return
      for (let tries = 1; ; tries++) {
        const res = await post(service, `load ${key}`, key)
        if (res.status === 201) {
          created.set(key, { id: (res.body as { id: number }).id, at: performance.now(), tries, replayed: res.headers['idempotent-replayed'] === 'true' })
          break
        }
        if (res.status === 503) {
          if (JSON.stringify(res.body) !== JSON.stringify(UNAVAILABLE) || res.headers['retry-after'] === undefined) badRetry.push(`${key}: ${res.text} retry-after ${String(res.headers['retry-after'])}`)
        } else {
          unexpected.push({ key, status: res.status, body: res.text })
          if (res.status !== 409) break
        }
        if (tries >= MAX_TRIES) { gaveUp.push(key); break }
        retried++
        await sleep(250)
      }
      await sleep(40)
    }
  }
  const load = Promise.all(Array.from({ length: WORKERS }, async () => { await worker() }))

  await sleep(300)
  const createdBeforeKill = created.size
  failover.kill('a')
  const killedAt = performance.now()

  // The gap: no writable primary.
  const gapPost = await post(service, 'written in the gap', 'gap-key')
  const gapPostMs = Math.round(performance.now() - killedAt)
  t.same({ status: gapPost.status, body: gapPost.body }, { status: 503, body: UNAVAILABLE }, `a write in the gap: ${gapPost.status} ${gapPost.text}, answered ${gapPostMs} ms after the kill`)
  t.ok(gapPost.headers['retry-after'] !== undefined, `with Retry-After (${String(gapPost.headers['retry-after'])})`)
  const ready = await call(service, { url: '/health/ready' })
  t.same({ status: ready.status, body: ready.body }, { status: 503, body: DB_UNAVAILABLE }, `/health/ready in the gap: ${ready.status} ${ready.text}`)
  const health = await call(service, { url: '/health' })
  t.equal(health.status, 200, `/health in the gap: ${health.status} ${health.text}`)
  const gapMs = Math.round(performance.now() - killedAt)

  await failover.promote('b')
  const promotedAt = performance.now()
  await withDeadline('the load', load, 60_000)

  const firstAfter = Math.min(...[...created.values()].filter((c) => c.at > killedAt).map((c) => c.at))
  const recoveryMs = Math.max(0, Math.round(firstAfter - promotedAt))
  const replayed = [...created.values()].filter((c) => c.replayed).length
  t.comment(`${createdBeforeKill} keys created before the kill; gap checks took ${gapMs} ms; ${retried} retries; ${replayed} stored 201s replayed`)
  t.ok(Number.isFinite(firstAfter), 'writes succeeded after the promotion')
  t.ok(recoveryMs <= 10_000, `first 201 ${recoveryMs} ms after promote() resolved (≤ 10 s)`)
  t.same(unexpected, [], 'no answer but 201 and 503 (no 500, no 409)')
  t.same(badRetry, [], 'every 503 is {"error":"Service unavailable"} with Retry-After')
  t.same(gaveUp, [], `no key retried ${MAX_TRIES} times in vain`)
  t.equal(created.size, KEYS, 'every key got its 201')

  // On b: each key once, with the id its 201 named.
  const stored = await failover.query<{ key: string, message_id: number }>('b',
    "select key, message_id::int as message_id from idempotency_keys where subject_id = 'alice' and key like 'failover-key-%' order by key", DATABASE)
  const storedByKey = new Map(stored.map((row) => [row.key, row.message_id]))
  t.equal(stored.length, KEYS, 'b stores every key once')
  t.same([...created].filter(([key, c]) => storedByKey.get(key) !== c.id).map(([key]) => key), [], 'each stored key names the id of its 201')
  const perKey = await failover.query<{ content: string, n: number }>('b',
    "select content, count(*)::int as n from messages where content like 'load failover-key-%' group by content having count(*) <> 1", DATABASE)
  t.same(perKey, [], 'no key\'s message twice')
  t.equal(await count(failover, 'b', "content like 'load failover-key-%'"), KEYS, 'one message per key on b')
  const onB = await tableIds(failover, 'b')
  const onBSet = new Set(onB)
  t.same([...created.values()].filter((c) => !onBSet.has(c.id)).map((c) => c.id), [], 'every 201\'s id is on b')
  t.equal(await count(failover, 'b', "content = 'written in the gap'"), 0, 'the write answered 503 in the gap stored nothing')

  // Pages and totals are b's table.
  const listed = await listAll(service)
  t.same(listed.statuses.filter((s) => s !== 200), [], 'every page 200')
  t.same(listed.ids, onB, 'the pages list exactly b\'s ids')
  t.same([...new Set(listed.totals)], [onB.length], `pagination.total is b's count (${onB.length})`)

  // The sync client resumes from T0.
  const resumed = await changes(service, t0)
  t.equal(resumed.status, 200, `since=T0 after the failover: ${resumed.status} (not 410) ${resumed.status === 200 ? '' : resumed.text}`)
  const resumer = new SyncClient(service, 100)
  for (const [id, m] of copyAtT0) resumer.copy.set(id, m)
  resumer.next = t0
  await follow(resumer)
  t.same(differences(resumer.sorted(), await servedBy(failover, 'b')), { missing: [], extra: [], differ: [] }, 'the client resumed from T0 holds exactly b\'s table')

  const conditional = await call(service, { url: '/v2/messages?limit=5', headers: { 'if-none-match': oldEtag } })
  t.equal(conditional.status, 200, 'If-None-Match with the ETag from before: 200, not 304 (the table changed)')
  t.not(conditional.headers.etag, oldEtag, 'a new ETag')
})

/** An SSE stream read with node:http: resolves, with the time, when the response ends or closes. */
function openStream (url: string): { ended: Promise<{ at: number, how: string, status: number, bytes: number }>, opened: Promise<number>, destroy: () => void } {
  let destroy = (): void => {}
  let resolveOpened: (status: number) => void = () => {}
  const opened = new Promise<number>((resolve) => { resolveOpened = resolve })
  const ended = new Promise<{ at: number, how: string, status: number, bytes: number }>((resolve) => {
    const req = httpRequest(url, { agent: false, headers: { accept: 'text/event-stream' } }, (res: IncomingMessage) => {
      let bytes = 0
      resolveOpened(res.statusCode ?? 0)
      res.on('data', (chunk: Buffer) => { bytes += chunk.length })
      res.on('end', () => { resolve({ at: performance.now(), how: 'end', status: res.statusCode ?? 0, bytes }) })
      res.on('error', () => { resolve({ at: performance.now(), how: 'error', status: res.statusCode ?? 0, bytes }) })
      res.on('close', () => { resolve({ at: performance.now(), how: 'close', status: res.statusCode ?? 0, bytes }) })
    })
    req.on('error', (err) => { resolveOpened(0); resolve({ at: performance.now(), how: `request error ${err.message}`, status: 0, bytes: 0 }) })
    req.end()
    destroy = () => { req.destroy() }
  })
  return { ended, opened, destroy: () => { destroy() } }
}

t.test('2. asynchronous replication: commits acknowledged after the standby was cut are lost, and never served', async (t) => {
  const failover = await cluster(t, false)
  const service = await app(t, failover)
  const base = await service.listen({ host: '127.0.0.1', port: 0 })
  await seed(t, service, 6, 'seed')
  await failover.waitReplayed()

  const client = new SyncClient(service, 100)
  await follow(client)
  const t1 = client.next ?? ''
  const copyAtT1 = new Map(client.copy)

  await failover.cutStandby()
  const lost: number[] = []
  for (const n of [1, 2, 3]) {
    const res = await post(service, `L${n}`)
    t.equal(res.status, 201, `L${n} acknowledged by a`)
    lost.push((res.body as { id: number }).id)
  }
  const withLost = await call(service, { url: '/v2/messages' })
  t.equal(withLost.status, 200)
  const eLost = String(withLost.headers.etag)
  t.equal((withLost.body as Page).pagination.total, 9, 'a lists the seed and L1..L3')
  await follow(client)
  const t2 = client.next ?? ''
  t.ok(lost.every((id) => client.copy.has(id)), 'the client following a holds L1..L3 at T2')

  // A live client, positioned after the lost rows.
  const stream = openStream(`${base}/v2/messages/changes?since=${t2}`)
  t.teardown(() => { stream.destroy() })
  t.equal(await withDeadline('the stream\'s head', stream.opened, 5_000), 200, 'the stream opens (200)')
  await sleep(200)

  failover.kill('a')
  const killedAt = performance.now()
  await failover.promote('b')
  const promotedAt = performance.now()

  t.same(await failover.query('b', `select id from messages where id in (${lost.join(',')}) or content in ('L1', 'L2', 'L3')`, DATABASE), [], 'by SQL: L1..L3 are not on b')

  const end = await Promise.race([stream.ended, sleep(10_000).then(() => undefined)])
  if (end === undefined) {
    t.fail('the stream at a position b never reached is still open 10 s after the promotion')
  } else {
    const ms = Math.round(end.at - promotedAt)
    t.ok(end.at - promotedAt <= 10_000, `the stream ended (${end.how}) ${ms} ms after promote() resolved, ${Math.round(end.at - killedAt)} ms after the kill`)
  }

  const first = await getRetrying(service, '/v2/messages?sort=id&order=asc&limit=100')
  t.equal(first.status, 200, `the first read after the promotion: ${first.status} ${first.status === 200 ? '' : first.text}`)

  const onB = await tableIds(failover, 'b')
  const listed = await listAll(service)
  t.same(listed.statuses.filter((s) => s !== 200), [], 'every page 200')
  t.same(listed.ids, onB, 'the pages list exactly b\'s ids, none of L1..L3')
  t.same([...new Set(listed.totals)], [onB.length], `total is b's count (${onB.length})`)

  const conditional = await call(service, { url: '/v2/messages', headers: { 'if-none-match': eLost } })
  t.equal(conditional.status, 200, `If-None-Match: E_lost → ${conditional.status} (200, not 304)`)
  const conditionalIds = conditional.status === 200 ? (conditional.body as Page).data.map((m) => m.id) : []
  t.same(conditionalIds.filter((id) => lost.includes(id)), [], 'and no lost id')
  t.equal(conditional.status === 200 ? (conditional.body as Page).pagination.total : -1, onB.length, 'and b\'s total')
  t.not(conditional.headers.etag, eLost, 'a new ETag')

  const item = await call(service, { url: `/v2/messages/${lost[0] ?? 0}` })
  t.same({ status: item.status, body: item.body }, { status: 404, body: NOT_FOUND }, 'GET /v2/messages/{L1}: 404')

  const expired = await changes(service, t2)
  t.same({ status: expired.status, body: expired.body }, { status: 410, body: EXPIRED }, 'since=T2 (past b\'s branch point): 410')
  const held = await changes(service, t1)
  t.equal(held.status, 200, `since=T1 (before the cut): ${held.status} ${held.status === 200 ? '' : held.text}`)

  const table = await servedBy(failover, 'b')
  const fromT1 = new SyncClient(service, 100)
  for (const [id, m] of copyAtT1) fromT1.copy.set(id, m)
  fromT1.next = t1
  if (held.status === 200) {
    await follow(fromT1)
    t.same(differences(fromT1.sorted(), table), { missing: [], extra: [], differ: [] }, 'the client at T1 catches up to exactly b\'s table')
  }
  const fresh = new SyncClient(service, 4)
  await follow(fresh)
  t.same(differences(fresh.sorted(), table), { missing: [], extra: [], differ: [] }, 'a client resynchronising from scratch holds exactly b\'s table')

  // New writes on b, through the service.
  const written: number[] = []
  for (let i = 0; i < 5; i++) {
    const res = await postRetrying(service, `after ${i}`, `after-${i}`)
    t.equal(res.status, 201, `a write after the promotion: ${res.status}`)
    if (res.status === 201) written.push((res.body as { id: number }).id)
  }
  const onBAfter = await tableIds(failover, 'b')
  t.ok(written.every((id) => onBAfter.includes(id)), 'the new writes are on b')
  t.same(written.filter((id) => lost.includes(id)), [], 'no new message takes the id of a lost one')
  const listedAfter = await listAll(service)
  t.same(listedAfter.ids, onBAfter, 'the pages list exactly b\'s ids after new writes')
  t.same([...new Set(listedAfter.totals)], [onBAfter.length], 'and b\'s total')
  await follow(fresh)
  t.same(differences(fresh.sorted(), await servedBy(failover, 'b')), { missing: [], extra: [], differ: [] }, 'the resynchronised client follows the new writes')
})

t.test('3. split brain guard: an old primary that comes back writable is never written to', async (t) => {
  const failover = await cluster(t, false)
  const service = await app(t, failover)
  await seed(t, service, 2, 'seed')
  await failover.waitReplayed()

  failover.kill('a')
  await failover.promote('b')
  const first = await postRetrying(service, 'after promotion', 'split-0')
  t.equal(first.status, 201, `the first write after the promotion: ${first.status} ${first.text}`)
  t.equal(await count(failover, 'b', "content = 'after promotion'"), 1, 'it landed on b')

  failover.restart('a')
  const [tl] = await failover.query<{ tli: string }>('a', 'select pg_is_in_recovery()::text as recovery, substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) as tli')
  t.equal(parseInt(tl?.tli ?? '', 16), 1, 'a is back, writable, on timeline 1')

  /** Writes one message every ~50 ms for at least `ms`, and on while `more()` says so. */
  async function writeFor (ms: number, prefix: string, more: () => boolean = () => false): Promise<{ contents: string[], failed: string[] }> {
    const contents: string[] = []
    const failed: string[] = []
    const deadline = performance.now() + ms
    for (let i = 0; performance.now() < deadline || more(); i++) {
      const content = `${prefix} ${i}`
      const res = await post(service, content)
      if (res.status === 201) contents.push(content)
      else failed.push(`${content}: ${res.status} ${res.text}`)
      await sleep(50)
    }
    return { contents, failed }
  }
  const contentList = (contents: string[]) => contents.map((c) => `'${c}'`).join(',')

  const both = await writeFor(3_000, 'two writable')
  t.same(both.failed, [], `every write 201 with two writable hosts (${both.contents.length} writes)`)
  t.equal(await count(failover, 'a', "content like 'two writable %' or content = 'after promotion'"), 0, 'a has none of them')
  t.equal(await count(failover, 'b', `content in (${contentList(both.contents)})`), both.contents.length, 'b has all of them')

  failover.kill('a')
  let rebuilt = false
  const rebuilding = failover.rebuildAsStandby('a').finally(() => { rebuilt = true })
  rebuilding.catch(() => {})
  const rebuildStarted = performance.now()
  const during = await writeFor(1_000, 'rebuilding', () => !rebuilt)
  await rebuilding
  t.comment(`a rebuilt as b's standby in ${Math.round(performance.now() - rebuildStarted)} ms, written to meanwhile`)
  const after = await writeFor(2_000, 'a standby again')
  t.same([...during.failed, ...after.failed], [], `every write 201 while and after a is rebuilt (${during.contents.length} + ${after.contents.length} writes)`)
  const all = [...during.contents, ...after.contents]
  t.equal(await count(failover, 'b', `content in (${contentList(all)})`), all.length, 'b has all of them')
  const [recovery] = await failover.query<{ recovery: boolean }>('a', 'select pg_is_in_recovery() as recovery')
  t.equal(recovery?.recovery, true, 'a is a standby')
})
