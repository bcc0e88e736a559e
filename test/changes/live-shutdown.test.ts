// CONTRACT 13 "Limits and faults", SIGTERM on a real server process: a held long-poll is answered at
// once (no changes, a next token), an open stream ends after its last complete event, the process
// exits 0 without waiting out the `wait`, and both clients go on from where they were on the next
// instance without a gap.
import t, { type Test } from 'tap'
import { request } from 'undici'
import { bounded } from '../helpers/bounded.js'
import { changesUrl, clientsOf, get, metricValue, pending, WireStream, type Answer } from '../helpers/live.js'
import { processDatabase, startServer, type ServerProcess } from '../helpers/server-process.js'
import { quiesceOn } from '../helpers/sync-client.js'

/** A `wait` the shutdown must not sit out, and a grace period it must not need. */
const WAIT_S = 60
const GRACE_MS = 30_000
/** Well before either: what "at once" means on a loaded test machine. */
const QUICK_MS = 10_000

async function gauge (server: ServerProcess, name: string, value: number): Promise<void> {
  const deadline = performance.now() + 30_000
  for (;;) {
    const res = await request(`${server.url}/metrics`)
    const found = metricValue(await res.body.text(), name)
    if (found === value) return
    if (performance.now() > deadline) throw new Error(`${name} is ${String(found)}, not ${value}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/**
 * What a client resuming after the restart must get: the write made between the instances, last, and
 * otherwise only upserts of rows it already holds. CONTRACT 12 lets a message come again: a token
 * stands below every transaction still open when its answer was read, in any database of the cluster
 * (another test's, in a shared server), so entries the copy showed may follow it again.
 */
function resumesExactly (t: Test, answer: Answer, who: string): void {
  const got = answer.data.map((e) => [e.op, e.message?.content])
  t.same(got.at(-1), ['upsert', 'between instances'], `${who}: the write between the instances, last`)
  t.same(got.slice(0, -1).filter(([op, content]) => op !== 'upsert' || !['before 1', 'before 2', 'before 3'].includes(String(content))), [],
    `${who}: nothing else but rows it held again (${got.length - 1})`)
}

t.test('SIGTERM: the held long-poll is answered at once, the stream ends after a complete event, exit 0; clients resume elsewhere without a gap', async (t) => {
  const db = await processDatabase(t)
  const seed = async (): Promise<void> => {
    await db.query("INSERT INTO users (subject_id, name, email, role) VALUES ('alice', 'Alice', 'alice@example.com', 'User')")
    await db.query("INSERT INTO messages (content, author_id) SELECT 'before ' || g, (SELECT id FROM users WHERE subject_id = 'alice') FROM generate_series(1, 3) g")
  }
  // PGlite has one owner at a time: written before the server holds it. A fresh PostgreSQL database is
  // migrated by the server: written once it listens.
  const onPostgres = db.env.DATABASE_URL !== undefined
  if (!onPostgres) await seed()
  const env = { ...db.env, AUTH_ISSUER: 'http://127.0.0.1:9', SHUTDOWN_GRACE_MS: String(GRACE_MS), MAX_EVENT_LOOP_DELAY_MS: '0' }
  const server = await startServer(t, env, db.cwd)
  clientsOf(t, server.url)
  if (onPostgres) {
    await seed()
    // Once every transaction older than the seed has ended (in a shared server, another test's), the
    // copy is current and the long-poll from its token has nothing to answer until SIGTERM: no seeded
    // row comes again meanwhile (CONTRACT 12).
    await quiesceOn(db.query)
  }

  const copy = await get(changesUrl(server.url))
  t.equal(copy.status, 200)
  const since = (copy.body as Answer).next
  t.equal((copy.body as Answer).data.length, 3)
  const poll = pending(get(changesUrl(server.url, { since, wait: String(WAIT_S) })))
  const stream = await WireStream.open(changesUrl(server.url))
  t.teardown(() => stream.close())
  t.equal(stream.status, 200)
  const first = await stream.event(1)
  t.equal(first.answer.data.length, 3, 'the stream has sent the initial copy')
  await gauge(server, 'live_long_polls_held', 1)
  await gauge(server, 'live_streams_open', 1)
  t.notOk(poll.settled(), 'the long-poll is held')

  const signalled = performance.now()
  server.child.kill('SIGTERM')
  const answered = await bounded(poll.promise, QUICK_MS)
  const answeredIn = performance.now() - signalled
  t.equal(answered.status, 200, 'the held long-poll is answered 200')
  const body = answered.body as Answer
  t.same(body, { data: [], next: body.next, hasMore: false }, 'with its changes so far (none) and a next token')
  t.type(body.next, 'string')
  t.ok(answeredIn < QUICK_MS, `answered ${Math.round(answeredIn)} ms after SIGTERM, not after its ${WAIT_S} s wait`)

  const how = await bounded(stream.done, QUICK_MS)
  t.equal(how, 'end', 'the stream ends as a response does, not cut off')
  t.equal(stream.incomplete, '', 'after its last complete event: nothing half-written')
  t.same(stream.malformed, [])
  t.ok(stream.raw.endsWith('\n\n'))
  const lastId = stream.events.at(-1)!.id

  const { code, signal } = await bounded(server.exited, GRACE_MS)
  const exitedIn = performance.now() - signalled
  t.same({ code, signal }, { code: 0, signal: null }, 'exit 0')
  t.ok(exitedIn < QUICK_MS, `exited ${Math.round(exitedIn)} ms after SIGTERM (grace ${GRACE_MS} ms, wait ${WAIT_S} s)`)

  // A write while no instance runs, then the next instance: both clients pick up exactly that.
  await db.query("INSERT INTO messages (content, author_id) SELECT 'between instances', id FROM users WHERE subject_id = 'alice'")
  const next = await startServer(t, env, db.cwd)
  t.teardown(async () => {
    next.child.kill('SIGTERM')
    await next.exited
  })
  clientsOf(t, next.url)
  const resumedPoll = await get(changesUrl(next.url, { since: body.next, wait: String(WAIT_S) }))
  t.equal(resumedPoll.status, 200)
  resumesExactly(t, resumedPoll.body as Answer, 'the long-poll client')
  const resumed = await WireStream.open(changesUrl(next.url), { 'last-event-id': lastId })
  t.teardown(() => resumed.close())
  resumesExactly(t, (await resumed.event(1)).answer, 'the stream client, by Last-Event-ID')
})
