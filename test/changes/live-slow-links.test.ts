// CONTRACT 13 "Limits and faults", a stream paced by its client, on real slow links (a loopback proxy
// that passes on what the server sends at a given rate): one change far larger than
// LIVE_MAX_BUFFER_BYTES and an initial copy of large rows reach clients that keep reading, however
// slowly, on one connection each and exactly. Clients that stop reading are live-stalls.test.ts.
import t, { type Test } from 'tap'
import { ANSWER_MAX_BYTES } from '../../src/changes/feed.js'
import { run } from '../helpers/exactness.js'
import { openEventSource, type EventSourceClient } from '../helpers/event-source.js'
import { createAuthor } from '../helpers/fixtures.js'
import { changesUrl, get, LiveCopy, listen, openStreams, type Answer } from '../helpers/live.js'
import { SlowLink } from '../helpers/slow-link.js'
import { differences, messagesAsServed, quiesce } from '../helpers/sync-client.js'

const SLOW = 256 * 1024
/** A bound that only a stuck client reaches: the largest transfer here takes under a minute at SLOW. */
const STUCK_MS = 240_000

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

/** A long-poll client through `base`: applies answers, holding each request up to 5 s, until it holds `rows` messages. */
async function longPoll (base: string, since: string, rows: number, copy: LiveCopy): Promise<void> {
  copy.next = since
  const deadline = performance.now() + STUCK_MS
  while (copy.copy.size < rows) {
    if (performance.now() > deadline) throw new Error(`${copy.name}: ${copy.copy.size} of ${rows} rows`)
    const res = await get(changesUrl(base, { since: copy.next, limit: '1000', wait: '5' }))
    if (res.status !== 200) throw new Error(`${copy.name}: ${res.status} ${res.text.slice(0, 200)}`)
    copy.apply(res.body as Answer, `answer ${copy.answers + 1}`)
  }
}

function exactly (t: Test, client: { copy: LiveCopy }, table: Awaited<ReturnType<typeof messagesAsServed>>, what: string): void {
  t.strictSame(differences(client.copy.sorted(), table), { missing: [], extra: [], differ: [] }, `${what}: the copy is the table (${table.length} rows)`)
  t.same(client.copy.outOfOrder, [], `${what}: nothing out of order`)
}

function oneConnection (t: Test, client: EventSourceClient, what: string): void {
  t.equal(client.opens, 1, `${what}: one connection, never cut off, never reconnected`)
  t.same(client.problems, [], `${what}: no error`)
}

t.test('one change of 12 MB at limit=1000 reaches SSE clients reading at full speed and at 256 KB/s, and a long-poll at 256 KB/s: one connection each, an exact copy', async (t) => {
  const { app, url } = await listen(t)
  const alice = await createAuthor(app, 'alice')
  const since = await caughtUpToken(url)
  const slow = await SlowLink.open(t, url, SLOW)
  const fast = openEventSource(t, changesUrl(url, { since, limit: '1000' }), 'full speed')
  const paced = openEventSource(t, changesUrl(slow.url, { since, limit: '1000' }), '256 KB/s')
  await openStreams(app, 2)

  // One transaction: 1,000 messages of 4,000 characters, every one of them '€' (three bytes).
  await run(app, `INSERT INTO messages (content, author_id) SELECT repeat('€', 4000) || ' ' || g, ${alice.id} FROM generate_series(1, 1000) g`)
  await quiesce(app)
  const table = await messagesAsServed(app)
  t.equal(table.length, 1000)
  const polled = new LiveCopy('long-poll at 256 KB/s')
  const polling = longPoll(slow.url, since, table.length, polled)

  for (const client of [fast, paced]) await client.until(() => client.copy.copy.size >= table.length, `${table.length} rows`, STUCK_MS)
  await polling
  for (const [client, what] of [[fast, 'full speed'], [paced, '256 KB/s']] as const) {
    oneConnection(t, client, what)
    exactly(t, client, table, what)
  }
  exactly(t, { copy: polled }, table, 'the long-poll')
  // About 12 MB in answers of about 1 MiB: `limit` is a maximum, hasMore says more follow.
  const largest = Math.max(...paced.eventBytes)
  t.ok(paced.eventBytes.length >= 10, `${paced.eventBytes.length} events`)
  t.ok(largest <= ANSWER_MAX_BYTES + 13_000, `each event at most one message past ${ANSWER_MAX_BYTES} bytes (largest ${largest})`)
  t.same(fast.eventBytes, paced.eventBytes, 'both streams got the same answers')
})

t.test('an initial copy of 2,000 rows of 1,500 characters over SSE at 256 KB/s: no reconnection, an exact copy', async (t) => {
  const { app, url } = await listen(t)
  const alice = await createAuthor(app, 'alice')
  await run(app, `INSERT INTO messages (content, author_id) SELECT repeat('y', 1500) || ' ' || g, ${alice.id} FROM generate_series(1, 2000) g`)
  await quiesce(app)
  const table = await messagesAsServed(app)
  const slow = await SlowLink.open(t, url, SLOW)
  const client = openEventSource(t, changesUrl(slow.url), 'initial copy at 256 KB/s')
  await client.until(() => client.copy.copy.size >= table.length, `${table.length} rows`, STUCK_MS)
  oneConnection(t, client, 'the initial copy')
  exactly(t, client, table, 'the initial copy')
  t.ok(slow.connections[0]!.delivered > 3_000_000, `${slow.connections[0]!.delivered} bytes through the link`)
})
