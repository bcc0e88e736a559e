// CONTRACT 12, delta sync: GET /v2/messages/changes. The shape of every answer, the initial copy over
// pages, changes by the API and by SQL, limits, malformed and expired tokens (by age, by TRUNCATE, by
// pruning), retention, and the route in the OpenAPI document. Exactness under concurrent writers of
// every kind is proven in delta-sync-property.test.ts.
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'drizzle-orm'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { decodeSyncToken, encodeSyncToken } from '../../src/changes/token.js'
import { build } from '../helpers/build.js'
import { createAuthor, createMessages, queryRows } from '../helpers/fixtures.js'
import { quiesce } from '../helpers/sync-client.js'

const INVALID = { error: 'Invalid sync token' }
const EXPIRED = { error: 'Sync token expired' }

interface Entry { op: 'upsert' | 'delete', id: number, message?: Record<string, unknown> }
interface Answer { data: Entry[], next: string, hasMore: boolean }

async function changes (app: App, query = ''): Promise<{ status: number, body: Answer, headers: Record<string, unknown> }> {
  const res = await app.inject({ url: `/v2/messages/changes${query}` })
  return { status: res.statusCode, body: res.json(), headers: res.headers }
}

/** Follows the feed from `since` (or the start) until hasMore is false; every answer's entries in order. */
async function follow (t: Test, app: App, since: string | undefined, limit?: number): Promise<{ entries: Entry[], next: string, calls: number }> {
  // Begins once every transaction older than now has ended: another test's, on the same server, holds
  // the feed back (CONTRACT 12 allows it), and would make what arrives when depend on timing.
  await quiesce(app)
  const entries: Entry[] = []
  let next = since
  for (let calls = 1; calls < 10_000; calls++) {
    const params = new URLSearchParams()
    if (next !== undefined) params.set('since', next)
    if (limit !== undefined) params.set('limit', String(limit))
    const res = await changes(app, `?${params.toString()}`)
    t.equal(res.status, 200)
    entries.push(...res.body.data)
    next = res.body.next
    if (!res.body.hasMore) return { entries, next, calls }
  }
  throw new Error('the feed never caught up')
}

/** What GET /v2/messages/{id} answers for every message, by id. */
async function currentMessages (app: App): Promise<Map<number, unknown>> {
  const rows = await queryRows<{ id: number }>(app.db, sql`select id::float8 as id from messages order by id`)
  const found = new Map<number, unknown>()
  for (const { id } of rows) found.set(id, (await app.inject({ url: `/v2/messages/${id}` })).json())
  return found
}

t.test('without since: every message as an upsert in id order over pages, each as GET /v2/messages/{id} shows it', async (t) => {
  const app = await build(t)
  const author = await createAuthor(app, 'alice', { name: 'Alice' })
  await createMessages(app, author.id, 7, (i) => ({ subject: i % 2 === 0 ? `s${i}` : null, priority: i === 3 ? 'urgent' : undefined }))

  await quiesce(app)
  const first = await changes(app, '?limit=3')
  t.equal(first.status, 200)
  t.equal(first.headers['cache-control'], 'no-store')
  t.match(first.headers['content-type'], /^application\/json/)
  t.same(Object.keys(first.body), ['data', 'next', 'hasMore'])
  t.equal(first.body.hasMore, true)
  t.same(first.body.data.map((e) => e.id), [1, 2, 3])

  const { entries, calls } = await follow(t, app, first.body.next, 3)
  t.equal(calls, 2, 'two more pages: 4-6 and 7')
  const all = [...first.body.data, ...entries]
  t.same(all.map((e) => e.id), [1, 2, 3, 4, 5, 6, 7])
  const expected = await currentMessages(app)
  t.same(all, [...expected].map(([id, message]) => ({ op: 'upsert', id, message })))
})

t.test('an empty table: one answer, nothing in it, caught up; polling it stays empty', async (t) => {
  const app = await build(t)
  const first = await changes(app)
  t.same(first.body.data, [])
  t.equal(first.body.hasMore, false)
  const again = await changes(app, `?since=${first.body.next}`)
  t.same(again.body.data, [])
  t.equal(again.body.hasMore, false)
})

t.test('with since: creations, changes and deletions by the API and by SQL, each content as it is now', async (t) => {
  const app = await build(t, { testAuth: true })
  const alice = await createAuthor(app, 'alice', { name: 'Alice' })
  const [kept, changed, deleted] = await createMessages(app, alice.id, 3)
  const start = await follow(t, app, undefined)
  t.equal(start.entries.length, 3)

  const created = await app.inject({ method: 'POST', url: '/v2/messages', headers: { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User' }) }, payload: { content: 'new one' } })
  t.equal(created.statusCode, 201)
  const newId = created.json().id as number
  t.equal((await app.inject({ method: 'DELETE', url: `/v2/messages/${deleted!.id}`, headers: { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User' }) } })).statusCode, 204)
  await app.db.execute(sql`update messages set content = 'edited by SQL', priority = 'high' where id = ${changed!.id}`)
  // Created and deleted again before the poll: the client never held it, and is told to drop it anyway.
  const [ghost] = await queryRows<{ id: number }>(app.db, sql`insert into messages (content, author_id) values ('ghost', ${alice.id}) returning id::float8 as id`)
  await app.db.execute(sql`delete from messages where id = ${ghost!.id}`)

  // Another test's transaction on the same server holds the feed back until it ends (CONTRACT 12).
  await quiesce(app)
  const poll = await changes(app, `?since=${start.next}`)
  t.equal(poll.status, 200)
  t.equal(poll.body.hasMore, false)
  const now = await currentMessages(app)
  t.same(poll.body.data, [
    { op: 'upsert', id: changed!.id, message: now.get(changed!.id) },
    { op: 'delete', id: deleted!.id },
    { op: 'upsert', id: newId, message: now.get(newId) },
    { op: 'delete', id: ghost!.id }
  ], 'each message once, ordered by id; the unchanged one is not sent')
  t.equal((now.get(changed!.id) as { content: string }).content, 'edited by SQL')
  t.notOk(poll.body.data.some((e) => e.id === kept!.id))

  const quiet = await changes(app, `?since=${poll.body.next}`)
  t.same(quiet.body, { data: [], next: quiet.body.next, hasMore: false }, 'nothing new: an empty answer')
})

t.test('renaming an author changes their messages: each comes again with the new name', async (t) => {
  const app = await build(t)
  const alice = await createAuthor(app, 'alice', { name: 'Alice' })
  const bob = await createAuthor(app, 'bob', { name: 'Bob' })
  const [a1, a2] = await createMessages(app, alice.id, 2)
  await createMessages(app, bob.id, 1)
  const start = await follow(t, app, undefined)

  await app.db.execute(sql`update users set name = 'Alice Liddell' where id = ${alice.id}`)
  await app.db.execute(sql`update users set email = 'new@example.com' where id = ${bob.id}`)
  await quiesce(app)
  const poll = await changes(app, `?since=${start.next}`)
  t.same(poll.body.data.map((e) => [e.op, e.id, (e.message?.author as { name: string } | undefined)?.name]),
    [['upsert', a1!.id, 'Alice Liddell'], ['upsert', a2!.id, 'Alice Liddell']], 'a change that no message shows (an email) is not sent')
})

t.test('limit: 1 to 1000, default 100, falling back and clamped like SPEC 4.9', async (t) => {
  const app = await build(t)
  const alice = await createAuthor(app, 'alice')
  await app.db.execute(sql`insert into messages (content, author_id) select 'bulk ' || g, ${alice.id} from generate_series(1, 1005) g`)
  const cases: Array<[string, number]> = [['', 100], ['?limit=', 100], ['?limit=abc', 100], ['?limit=0', 1], ['?limit=-5', 1],
    ['?limit=7', 7], ['?limit=7.9', 7], ['?limit=1000', 1000], ['?limit=5000', 1000]]
  for (const [query, size] of cases) {
    const res = await changes(app, query)
    t.equal(res.status, 200, query)
    t.equal(res.body.data.length, size, `${query || 'no limit'}: ${size}`)
    t.equal(res.body.hasMore, true)
  }
  // The same limits apply to changes: 1005 rows in one statement are 1005 changes.
  const start = await follow(t, app, undefined, 1000)
  await app.db.execute(sql`update messages set content = content || '!'`)
  await quiesce(app)
  const res = await changes(app, `?since=${start.next}&limit=5000`)
  t.equal(res.body.data.length, 1000)
  t.equal(res.body.hasMore, true)
  const rest = await changes(app, `?since=${res.body.next}&limit=5000`)
  t.equal(rest.body.data.length, 5)
  t.equal(rest.body.hasMore, false)
  t.same([...res.body.data, ...rest.body.data].map((e) => e.id), Array.from({ length: 1005 }, (_, i) => i + 1))
})

t.test('a malformed token is 400 Invalid sync token, and changes nothing', async (t) => {
  const app = await build(t)
  const alice = await createAuthor(app, 'alice')
  await createMessages(app, alice.id, 2)
  const good = (await changes(app, '?limit=1')).body.next
  const raw = Buffer.from(good, 'base64url').toString()
  const forge = (text: string) => Buffer.from(text).toString('base64url')
  const listCursor = (await app.inject({ url: '/v2/messages?limit=1' })).json().pagination.nextCursor as string
  const malformed = [
    '', 'abc', 'not a token', `${good}x`, `${good}=`, good.slice(0, 12), listCursor, '%00', 'x'.repeat(5000),
    forge(raw.replace(/^2\./, '3.')), forge(raw.replace('.s.', '.x.')), forge(`${raw}.1`), forge(raw.replace(/\.\d+$/, '.-1')),
    // Issued in the future; on timeline 0; at a WAL position past 2^64 (the token ends timeline.lsn.issued).
    forge(raw.replace(/\.\d+$/, `.${Date.now() + 2 * 3_600_000}`)), forge(raw.replace(/\.\d+(\.\d+\.\d+)$/, '.0$1')),
    forge(raw.replace(/\.\d+(\.\d+)$/, '.18446744073709551616$1')),
    // Every digit appended to the token's text: a position it never issued.
    ...Array.from({ length: 10 }, (_, digit) => forge(`${raw}${digit}`)),
    forge('1.c.1.18446744073709551616.0.1'), forge('1.c.1.5.9223372036854775808.1'), forge('1.s.1.5.9007199254740992.1')
  ]
  const before = await queryRows<{ n: number }>(app.db, sql`select count(*)::float8 as n from message_changes`)
  for (const token of malformed) {
    const res = await app.inject({ url: `/v2/messages/changes?since=${encodeURIComponent(token)}` })
    t.equal(res.statusCode, 400, `since=${token.slice(0, 40)}`)
    t.same(res.json(), INVALID)
    t.equal(res.headers['cache-control'], 'no-store')
  }
  t.same(await queryRows(app.db, sql`select count(*)::float8 as n from message_changes`), before)
  t.equal((await changes(app, `?since=${good}`)).status, 200, 'the real token still works')
})

t.test('410 Sync token expired: older than SYNC_RETENTION_HOURS, or issued before a TRUNCATE', async (t) => {
  await t.test('by age', async (t) => {
    // 1.8 seconds of retention.
    const app = await build(t, { config: { syncRetentionHours: 0.0005 } })
    const fresh = await changes(app)
    t.equal((await changes(app, `?since=${fresh.body.next}`)).status, 200)
    await sleep(2000)
    const res = await changes(app, `?since=${fresh.body.next}`)
    t.equal(res.status, 410)
    t.same(res.body, EXPIRED)
    t.equal(res.headers['cache-control'], 'no-store')
    t.equal((await changes(app)).status, 200, 'starting again without since works')
  })

  await t.test('by TRUNCATE, of messages or of users (which cascades): in copy mode and in change mode', async (t) => {
    const app = await build(t)
    const alice = await createAuthor(app, 'alice')
    await createMessages(app, alice.id, 3)
    const copying = (await changes(app, '?limit=1')).body
    t.equal(copying.hasMore, true)
    const polling = (await follow(t, app, undefined)).next
    await app.db.execute(sql`truncate messages`)
    for (const token of [copying.next, polling]) {
      const res = await changes(app, `?since=${token}`)
      t.equal(res.status, 410)
      t.same(res.body, EXPIRED)
    }
    const restart = await follow(t, app, undefined)
    t.same(restart.entries, [])
    await createMessages(app, alice.id, 1)
    await quiesce(app)
    const after = await changes(app, `?since=${restart.next}`)
    t.equal(after.body.data.length, 1, 'a token issued after the TRUNCATE follows new writes')
    await app.db.execute(sql`truncate users cascade`)
    t.same((await changes(app, `?since=${after.body.next}`)).body, EXPIRED)
  })

  await t.test('below the pruned horizon', async (t) => {
    const app = await build(t)
    const token = (await changes(app)).body.next
    const { position } = decodeSyncToken(token)
    t.equal(position.kind, 'changes')
    await app.db.execute(sql`update sync_state set horizon = ${(BigInt(position.kind === 'changes' ? position.xid : '0') + 1n).toString()}::xid8`)
    t.same((await changes(app, `?since=${token}`)).body, EXPIRED)
  })
})

t.test('retention: the log is pruned below the horizon of SYNC_RETENTION_HOURS ago, and a client starting again is exact', async (t) => {
  const app = await build(t, { config: { syncRetentionHours: 0.0005 } })
  const alice = await createAuthor(app, 'alice')
  await createMessages(app, alice.id, 5)
  await app.db.execute(sql`delete from messages where id in (1, 2)`)
  const logged = async () => (await queryRows<{ n: number }>(app.db, sql`select count(*)::float8 as n from message_changes`))[0]?.n
  t.equal(await logged(), 7, '5 inserts and 2 deletes')
  // The mark is where the oldest running transaction of the whole server stands, and test files running
  // beside this one write to the same server: a transaction of theirs that began among these writes put
  // the mark among them, and only the changes before it went (4 of 7). Wait until every transaction
  // older than these changes has ended, so that the mark falls after them (at once on a server of its own).
  const pastOurs = async () => (await queryRows<{ past: boolean }>(app.db, sql`select pg_snapshot_xmin(pg_current_snapshot()) > (select max(xid) from message_changes) as past`))[0]?.past === true
  for (let waited = 0; !(await pastOurs()) && waited < 60_000; waited += 100) await sleep(100)
  t.equal(await app.changes.prune(), 0, 'the first run only marks where the oldest transaction stands')
  await sleep(2000)
  await createMessages(app, alice.id, 1)
  t.equal(await app.changes.prune(), 7, 'a mark older than the retention: everything logged before it goes')
  t.equal(await logged(), 1, 'the change written after the mark stays')
  const restart = await follow(t, app, undefined)
  t.same(restart.entries.map((e) => [e.op, e.id]), [['upsert', 3], ['upsert', 4], ['upsert', 5], ['upsert', 6]])
})

t.test('tokens are opaque but round-trip exactly', async (t) => {
  const token = { epoch: '3', issuedAt: 1795475265371, position: { kind: 'changes' as const, xid: '18446744073709551615', id: 9007199254740991 }, point: { timeline: 4294967295, lsn: 18446744073709551615n } }
  t.same(decodeSyncToken(encodeSyncToken(token)), token)
  const snapshot = { epoch: '1', issuedAt: 0, position: { kind: 'snapshot' as const, watermark: '744', after: 0 }, point: { timeline: 1, lsn: 24050128n } }
  t.same(decodeSyncToken(encodeSyncToken(snapshot)), snapshot)
  // Tokens issued before they named their history: an unknown point of timeline 1.
  const v1 = Buffer.from('1.c.3.744.12.1795475265371').toString('base64url')
  t.same(decodeSyncToken(v1), { epoch: '3', issuedAt: 1795475265371, position: { kind: 'changes', xid: '744', id: 12 }, point: { timeline: 1, lsn: 18446744073709551615n } })
})

t.test('the OpenAPI document declares the route, its query (wait included) and its 200 as JSON and as events, 400 and 410', async (t) => {
  const app = await build(t)
  const doc = (await app.inject({ url: '/api-docs/json' })).json()
  const op = doc.paths['/v2/messages/changes']?.get
  t.ok(op, 'documented')
  // Its own 200, 400 and 410, and what every rate-limited operation may answer, and Node's own 431 (src/openapi/document.ts).
  t.same(Object.keys(op.responses).sort(), ['200', '400', '410', '429', '431', '500', '503'])
  t.same(op.parameters.map((p: { name: string, in: string }) => `${p.in}:${p.name}`).sort(), ['query:limit', 'query:since', 'query:wait'])
  t.ok(doc.components.schemas.MessageChanges, 'the answer is a named schema')
  // CONTRACT 13: the same 200 as JSON or as a stream of events.
  t.same(Object.keys(op.responses['200'].content).sort(), ['application/json', 'text/event-stream'])
  t.equal(op.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/MessageChanges')
})
