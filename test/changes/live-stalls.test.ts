// CONTRACT 13 "Limits and faults", clients that stop reading, on a real slow link (a loopback proxy
// that can stop reading what the server sends): such a stream is closed once nothing it was sent has
// been read for LIVE_STALL_S, and its client resumes from its last event and loses nothing; a stalled
// stream holds no instance past its shutdown grace; and keep-alives carry the stream's position, so a
// reconnecting EventSource asks for a recent one.
import { connect, createServer, type AddressInfo, type Socket } from 'node:net'
import t from 'tap'
import { connectionKey, unacknowledgedBytes } from '../../src/changes/live/unacknowledged.js'
import { bounded } from '../helpers/bounded.js'
import { run } from '../helpers/exactness.js'
import { openEventSource } from '../helpers/event-source.js'
import { createAuthor } from '../helpers/fixtures.js'
import { changesUrl, clientsOf, get, listen, metricValue, openStreams, parseBlock, scrape, splitBlocks, untilMetric, type Answer } from '../helpers/live.js'
import { processDatabase, startServer } from '../helpers/server-process.js'
import { SlowLink } from '../helpers/slow-link.js'
import { differences, messagesAsServed, quiesce } from '../helpers/sync-client.js'

const STALL_S = 2
/** A bound that only a stuck client or server reaches. */
const STUCK_MS = 120_000

async function caughtUpToken (url: string): Promise<string> {
  for (let next: string | undefined, calls = 0; calls < 10_000; calls++) {
    const res = await get(changesUrl(url, { since: next, limit: '1000' }))
    if (res.status !== 200) throw new Error(`poll: ${res.status} ${res.text}`)
    const answer = res.body as Answer
    next = answer.next
    if (!answer.hasMore) return next
  }
  throw new Error('the feed never caught up')
}

/** More than the system's buffers between the server and a client that stopped reading hold: 600 messages of 12 KB. */
const FILL_BUFFERS = (authorId: number, tag: string): string =>
  `INSERT INTO messages (content, author_id) SELECT repeat('€', 4000) || ' ${tag} ' || g, ${authorId} FROM generate_series(1, 600) g`

t.test('a client that stops reading is closed after LIVE_STALL_S; it resumes from its last event id and loses nothing', async (t) => {
  const { app, url } = await listen(t, { liveStallS: STALL_S, liveHeartbeatS: 1 })
  const alice = await createAuthor(app, 'alice')
  const since = await caughtUpToken(url)
  const link = await SlowLink.open(t, url, Number.POSITIVE_INFINITY)
  const client = openEventSource(t, changesUrl(link.url, { since, limit: '1000' }), 'stopped reader')
  await openStreams(app, 1)
  await run(app, `INSERT INTO messages (content, author_id) VALUES ('read before it stopped', ${alice.id})`)
  await client.until(() => client.copy.copy.size === 1, 'the first message')

  link.stop()
  await run(app, FILL_BUFFERS(alice.id, 'while stopped'))
  const stalled = await untilMetric(async () => await scrape(app), 'live_streams_stalled_total', (v) => v === 1, STUCK_MS)
  t.equal(stalled, 1, 'the stream is closed as stalled')
  await openStreams(app, 0)
  t.equal(client.opens, 1, 'it was one connection until then')

  // The client reads again: it gets what the system held for it, complete events only, then the end
  // of the stream, and reconnects from the last event it holds.
  link.resume()
  await run(app, `INSERT INTO messages (content, author_id) VALUES ('after the resume', ${alice.id})`)
  await quiesce(app)
  const table = await messagesAsServed(app)
  await client.until(() => client.copy.copy.size === table.length, `${table.length} rows`, STUCK_MS)
  t.equal(client.opens, 2, 'one reconnection, the one the stall asked for')
  t.type(client.lastEventIds[1], 'string', 'the reconnection names the last event it holds')
  t.strictSame(differences(client.copy.sorted(), table), { missing: [], extra: [], differ: [] }, `the copy is the table (${table.length} rows)`)
  t.same(client.copy.outOfOrder, [])
  t.same(client.problems, [])
})

t.test('a quiet stream whose client acknowledges nothing is closed too, though all it was sent left the process: keep-alives do not keep it open', async (t) => {
  const { app, url } = await listen(t, { liveStallS: STALL_S, liveHeartbeatS: 1 })
  const alice = await createAuthor(app, 'alice')
  const since = await caughtUpToken(url)
  const link = await SlowLink.open(t, url, Number.POSITIVE_INFINITY)
  const client = openEventSource(t, changesUrl(link.url, { since, limit: '1000' }), 'backgrounded')
  await openStreams(app, 1)
  // A backgrounded phone: its window fills with what it was sent, about 1 MB, which the system's
  // buffers hold whole; from then on only keep-alives are written, and they too leave the process.
  link.stop()
  const delivered = metricValue(await scrape(app), 'live_delivery_delay_seconds_count') ?? 0
  await run(app, `INSERT INTO messages (content, author_id) SELECT repeat('€', 4000) || ' quiet ' || g, ${alice.id} FROM generate_series(1, 80) g`)
  await untilMetric(async () => await scrape(app), 'live_delivery_delay_seconds_count', (v) => (v ?? 0) > delivered, STUCK_MS)
  const metrics = await scrape(app)
  t.equal(metricValue(metrics, 'live_unsent_bytes'), 0, 'the process holds nothing unsent for it')
  t.equal(metricValue(metrics, 'live_streams_paced'), 0, 'nor does the stream wait')
  await untilMetric(async () => await scrape(app), 'live_streams_stalled_total', (v) => v === 1, STUCK_MS)
  await openStreams(app, 0)
  t.pass('closed: the system says its client acknowledged nothing for LIVE_STALL_S')
  client.close()
})

t.test('a keep-alive moves the EventSource\'s last event id: it reconnects from the stream\'s position, not its last event', async (t) => {
  const { app, url } = await listen(t, { liveHeartbeatS: 1 })
  const alice = await createAuthor(app, 'alice')
  const since = await caughtUpToken(url)
  const link = await SlowLink.open(t, url, Number.POSITIVE_INFINITY)
  const client = openEventSource(t, changesUrl(link.url, { since }), 'eventsource')
  await openStreams(app, 1)
  await run(app, `INSERT INTO messages (content, author_id) VALUES ('the last event', ${alice.id})`)
  await client.until(() => client.copy.copy.size === 1, 'the event')
  const eventId = client.copy.next

  // Two keep-alives after the event, passed on to the client; then the connection ends cleanly.
  const first = link.connections[0]!
  const keepAliveIds = (): string[] => {
    const body = first.response.slice(first.response.indexOf('\r\n\r\n') + 4).replace(/(^|\r\n)[0-9a-f]+\r\n/g, '$1').replaceAll('\r\n', '')
    return splitBlocks(body).blocks.map(parseBlock).flatMap((b) => b.kind === 'comment' && b.id !== undefined ? [b.id] : [])
  }
  const deadline = performance.now() + STUCK_MS
  while (keepAliveIds().length < 2) {
    if (performance.now() > deadline) throw new Error(`no two keep-alives: ${first.response.slice(-300)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  first.end()
  await client.until(() => client.opens === 2, 'the reconnection', STUCK_MS)
  const ids = keepAliveIds()
  t.not(ids.at(-1), eventId, 'a keep-alive\'s id is a new token for the position')
  t.equal(client.lastEventIds[1], ids.at(-1), 'the reconnection sends the last keep-alive\'s id as Last-Event-ID')

  await run(app, `INSERT INTO messages (content, author_id) VALUES ('after the reconnection', ${alice.id})`)
  await quiesce(app)
  const table = await messagesAsServed(app)
  await client.until(() => client.copy.copy.size === table.length, `${table.length} rows`)
  t.strictSame(differences(client.copy.sorted(), table), { missing: [], extra: [], differ: [] }, 'and from there it misses nothing')
  t.same(client.problems, [])
})

t.test('SIGTERM with a stalled stream: the instance still exits 0 within its grace', async (t) => {
  const GRACE_MS = 6_000
  const db = await processDatabase(t)
  // An initial copy larger than the system's buffers hold.
  const seed = async (): Promise<void> => {
    await db.query("INSERT INTO users (subject_id, name, email, role) VALUES ('alice', 'Alice', 'alice@example.com', 'User')")
    await db.query(FILL_BUFFERS(1, 'to copy'))
  }
  // PGlite has one owner at a time: written before the server holds it; PostgreSQL once it is migrated.
  const onPostgres = db.env.DATABASE_URL !== undefined
  if (!onPostgres) await seed()
  const server = await startServer(t, { ...db.env, AUTH_ISSUER: 'http://127.0.0.1:9', SHUTDOWN_GRACE_MS: String(GRACE_MS), MAX_EVENT_LOOP_DELAY_MS: '0' }, db.cwd)
  clientsOf(t, server.url)
  if (onPostgres) await seed()
  const metrics = async (): Promise<string> => (await get(`${server.url}/metrics`)).text
  // A client that reads nothing at all, from the start.
  const link = await SlowLink.open(t, server.url, Number.POSITIVE_INFINITY)
  link.stop()
  const client = openEventSource(t, changesUrl(link.url, { limit: '1000' }), 'stalled at shutdown')
  t.equal(await untilMetric(metrics, 'live_streams_paced', (v) => v === 1, STUCK_MS), 1, 'the stream waits for its client, which reads nothing')

  const signalled = performance.now()
  server.child.kill('SIGTERM')
  const { code, signal } = await bounded(server.exited, STUCK_MS)
  const exitedIn = Math.round(performance.now() - signalled)
  t.same({ code, signal }, { code: 0, signal: null }, `exit 0, ${exitedIn} ms after SIGTERM (past its grace of ${GRACE_MS} ms it would exit 1)`)
  client.close()
})

// The system's own count, which tells a stalled client apart when everything it was sent fits in the
// buffers and the process holds nothing unsent (src/changes/live/unacknowledged.ts).
t.test('the system tells which connection\'s peer acknowledges nothing', async (t) => {
  const server = createServer()
  const accepted = new Promise<Socket>((resolve) => { server.once('connection', resolve) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close() })
  const client = connect((server.address() as AddressInfo).port, '127.0.0.1')
  t.teardown(() => { client.destroy() })
  client.pause()
  const side = await accepted
  t.teardown(() => { side.destroy() })
  const key = connectionKey(side.localPort, side.remotePort)
  t.equal((await unacknowledgedBytes({ localPorts: new Set([side.localPort!]), ipv4: true, ipv6: false }))?.get(key), 0, 'nothing sent: nothing unacknowledged')
  // Written until the system takes no more: the client's window is full.
  const block = Buffer.alloc(65_536)
  for (let i = 0; i < 1_000 && side.writableLength === 0; i++) side.write(block)
  t.ok(side.writableLength > 0, 'the system\'s buffers are full')
  const stuck = (await unacknowledgedBytes({ localPorts: new Set([side.localPort!]), ipv4: true, ipv6: false }))?.get(key) ?? 0
  t.ok(stuck > 0, `${stuck} bytes unacknowledged`)
  client.resume()
  client.on('data', () => {})
  await new Promise<void>((resolve) => { side.write(Buffer.alloc(0), () => { resolve() }) })
  const deadline = performance.now() + STUCK_MS
  while (((await unacknowledgedBytes({ localPorts: new Set([side.localPort!]), ipv4: true, ipv6: false }))?.get(key) ?? -1) !== 0) {
    if (performance.now() > deadline) throw new Error('the client read everything, yet bytes stay unacknowledged')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  t.pass('once the client reads, everything is acknowledged')
})
