// CONTRACT 13, live delivery on GET /v2/messages/changes, from outside, on a server listening on
// loopback: the long-poll `wait`, Server-Sent Events (framing, start position, heartbeats, errors,
// no compression), the live limits, the rate limit, CORS, the OpenAPI document and the metrics.
// Exactness under concurrent writers of every kind, with clients coming and going across instances,
// is live-property.test.ts; SIGTERM is live-shutdown.test.ts; slow links and clients that stop
// reading are live-slow-links.test.ts and live-stalls.test.ts.
import { Writable } from 'node:stream'
import t, { type Test } from 'tap'
import { buildApp, type App } from '../../src/app.js'
import { bounded } from '../helpers/bounded.js'
import { testConfig } from '../helpers/build.js'
import { postgresDatabase } from '../helpers/database.js'
import { run } from '../helpers/exactness.js'
import { createAuthor, createMessages } from '../helpers/fixtures.js'
import {
  answeredWithoutHolding, changesUrl, EXPIRED, get, heldPolls, INVALID, listen, metricValue, openStreams,
  pending, scrape, streams, untilMetric, type Answer, type Entry, type Polled, type WireStream
} from '../helpers/live.js'
import { quiesce } from '../helpers/sync-client.js'

const ALICE = { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User' }) }
const UNAVAILABLE = { error: 'Service unavailable' }
const TOO_MANY = { error: 'Too many requests' }
/** How long a held answer may take to come: far above "promptly", far below a `wait` of 60. */
const PROMPT_MS = 30_000

async function post (app: App, content: string): Promise<number> {
  const res = await app.inject({ method: 'POST', url: '/v2/messages', headers: ALICE, payload: { content } })
  if (res.statusCode !== 201) throw new Error(`POST /v2/messages: ${res.statusCode} ${res.body}`)
  return (res.json() as { id: number }).id
}

/** What GET /v2/messages/{id} answers now, as the upsert the feed must send. */
async function upsertOf (app: App, id: number): Promise<Entry> {
  return { op: 'upsert', id, message: (await app.inject({ url: `/v2/messages/${id}` })).json() }
}

/** Polls (without waiting) from `since`, or from the start, until hasMore is false; every answer. */
async function follow (app: App, since?: string, limit?: number): Promise<{ answers: Answer[], next: string }> {
  await quiesce(app)
  const answers: Answer[] = []
  let next = since
  for (let i = 0; i < 10_000; i++) {
    const query = new URLSearchParams()
    if (next !== undefined) query.set('since', next)
    if (limit !== undefined) query.set('limit', String(limit))
    const res = await app.inject({ url: `/v2/messages/changes?${query.toString()}` })
    if (res.statusCode !== 200) throw new Error(`poll: ${res.statusCode} ${res.body}`)
    const answer = res.json() as Answer
    answers.push(answer)
    next = answer.next
    if (!answer.hasMore) return { answers, next }
  }
  throw new Error('the feed never caught up')
}

const caughtUp = async (app: App): Promise<string> => (await follow(app)).next

/** A request that must be answered without being held: fails the test if the held gauge moved first. */
async function atOnce (t: Test, app: App, url: string, what: string): Promise<Polled> {
  const answer = await bounded(answeredWithoutHolding(app, pending(get(url))), PROMPT_MS)
  if (answer === 'held') {
    t.fail(`${what}: held, not answered at once`)
    throw new Error(`${what} was held`)
  }
  return answer
}

const heads = (res: Polled | WireStream): Record<string, unknown> => res.headers as Record<string, unknown>

t.test('wait: ignored without since; a value that is not a positive number is 0, above 60 it is clamped; documented', async (t) => {
  const { app, url } = await listen(t)
  const alice = await createAuthor(app, 'alice')
  await createMessages(app, alice.id, 2)
  await quiesce(app)

  const copy = await atOnce(t, app, changesUrl(url, { wait: '60' }), 'an initial copy with wait=60')
  t.equal(copy.status, 200)
  const first = copy.body as Answer
  t.same(first.data.map((e) => [e.op, e.id]), [['upsert', 1], ['upsert', 2]], 'the initial copy never waits')
  t.equal(first.hasMore, false)
  t.equal(heads(copy)['cache-control'], 'no-store')

  for (const wait of ['', 'abc', 'soon', '0', '-0', '-5', '-61', '0.9']) {
    const res = await atOnce(t, app, changesUrl(url, { since: first.next, wait }), `wait=${wait}`)
    t.equal(res.status, 200, `wait=${wait}: 200`)
    t.same(res.body, { data: [], next: (res.body as Answer).next, hasMore: false }, `wait=${wait}: nothing to wait for, answered at once`)
    t.type((res.body as Answer).next, 'string')
    t.match(String(heads(res)['content-type']), /^application\/json/)
  }

  // Above 60 is clamped, not refused: such a request is held, and answered by the next write.
  let since = first.next
  for (const wait of ['61', '1000', '60', '1.5']) {
    const held = pending(get(changesUrl(url, { since, wait })))
    await heldPolls(app, 1)
    t.notOk(held.settled(), `wait=${wait}: held`)
    const id = await post(app, `for wait=${wait}`)
    const res = await bounded(held.promise, PROMPT_MS)
    t.equal(res.status, 200, `wait=${wait}: 200 once a write came`)
    t.same((res.body as Answer).data, [await upsertOf(app, id)])
    await heldPolls(app, 0)
    since = (res.body as Answer).next
  }

  // The OpenAPI document shows wait, and the text/event-stream answer.
  const doc = (await app.inject({ url: '/api-docs/json' })).json()
  const op = doc.paths['/v2/messages/changes']?.get
  t.equal(op?.operationId, 'getMessageChanges')
  const param = (op?.parameters ?? []).find((p: { name: string, in: string }) => p.name === 'wait' && p.in === 'query')
  t.ok(param, 'a query parameter wait')
  t.notOk(param?.required, 'optional')
  t.ok(op?.responses?.['200']?.content?.['text/event-stream'], 'a text/event-stream response')
  t.ok(op?.responses?.['200']?.content?.['application/json'], 'besides the JSON one')
  t.ok(op?.responses?.['503'], '503 (live limit) documented')
  t.ok(op?.responses?.['429'], '429 (per client) documented')
})

t.test('with since: answered at once when a change is there; else held until a write can be shown (API or SQL), or `wait` runs out', async (t) => {
  const { app, url } = await listen(t)
  const alice = await createAuthor(app, 'alice', { name: 'Alice' })
  const before = await caughtUp(app)
  await run(app, `INSERT INTO messages (content, author_id) VALUES ('already there', ${alice.id})`)
  await quiesce(app)
  const ready = await atOnce(t, app, changesUrl(url, { since: before, wait: '60' }), 'a change waiting')
  t.equal(ready.status, 200)
  t.same(ready.body, { data: [await upsertOf(app, 1)], next: (ready.body as Answer).next, hasMore: false }, 'a change already there: answered at once, even with wait=60')
  let since = (ready.body as Answer).next
  let sqlId = 0

  const writes: Array<[string, () => Promise<Entry[]>]> = [
    ['POST through the API', async () => [await upsertOf(app, await post(app, 'by the API'))]],
    ['INSERT by SQL', async () => {
      await run(app, `INSERT INTO messages (id, content, author_id) OVERRIDING SYSTEM VALUE VALUES (5000, 'by SQL', ${alice.id})`)
      sqlId = 5000
      return [await upsertOf(app, sqlId)]
    }],
    ['UPDATE by SQL', async () => {
      await run(app, `UPDATE messages SET content = 'edited by SQL', priority = 'urgent' WHERE id = ${sqlId}`)
      return [await upsertOf(app, sqlId)]
    }],
    ['DELETE by SQL', async () => {
      await run(app, `DELETE FROM messages WHERE id = ${sqlId}`)
      return [{ op: 'delete', id: sqlId }]
    }],
    ['DELETE through the API', async () => {
      const res = await app.inject({ method: 'DELETE', url: '/v2/messages/1', headers: ALICE })
      if (res.statusCode !== 204) throw new Error(`DELETE: ${res.statusCode}`)
      return [{ op: 'delete', id: 1 }]
    }]
  ]
  for (const [what, write] of writes) {
    const held = pending(get(changesUrl(url, { since, wait: '60' })))
    await heldPolls(app, 1)
    t.notOk(held.settled(), `${what}: the long-poll is held until then`)
    const expected = await write()
    const res = await bounded(held.promise, PROMPT_MS)
    t.equal(res.status, 200, `${what}: answered`)
    t.equal(heads(res)['cache-control'], 'no-store')
    t.same(res.body, { data: expected, next: (res.body as Answer).next, hasMore: false }, `${what}: the answer shows the write`)
    await heldPolls(app, 0)
    since = (res.body as Answer).next
  }

  // wait=1 and nothing written: 200 with no changes, hasMore false, and a next token to call again with.
  const held = pending(get(changesUrl(url, { since, wait: '1' })))
  await heldPolls(app, 1)
  t.notOk(held.settled(), 'wait=1: held first')
  const res = await bounded(held.promise, PROMPT_MS)
  t.equal(res.status, 200)
  t.match(String(heads(res)['content-type']), /^application\/json/)
  t.equal(heads(res)['cache-control'], 'no-store')
  const body = res.body as Answer
  t.same(Object.keys(body), ['data', 'next', 'hasMore'])
  t.same(body.data, [], 'wait=1: no changes')
  t.equal(body.hasMore, false)
  t.type(body.next, 'string')
  t.ok(body.next.length > 0)
  await heldPolls(app, 0)
  const [created] = await createMessages(app, alice.id, 1)
  await quiesce(app)
  const again = await get(changesUrl(url, { since: body.next }))
  t.same(again.body, { data: [await upsertOf(app, created!.id)], next: (again.body as Answer).next, hasMore: false }, 'the next token of an empty answer follows on')
})

t.test('an event stream: 200 text/event-stream, no-store; the initial copy as events framed id/event/data, as a poll answers', async (t) => {
  const { app, url } = await listen(t)
  const open = streams(t)
  const alice = await createAuthor(app, 'alice')
  await createMessages(app, alice.id, 5)
  const polled = await follow(app, undefined, 2)
  t.equal(polled.answers.length, 3, 'a poll answers the copy in three pages at limit 2')

  const s = await open(changesUrl(url, { limit: '2' }))
  t.equal(s.status, 200)
  t.match(String(s.headers['content-type']), /^text\/event-stream/)
  t.equal(s.headers['cache-control'], 'no-store')
  t.equal(s.headers['content-encoding'], undefined)
  await s.until(() => s.events.some((e) => !e.answer.hasMore), 'the end of the initial copy')
  t.same(s.malformed, [], 'every block is an event or a comment')
  t.same(s.events.map((e) => ({ data: e.answer.data, hasMore: e.answer.hasMore })), polled.answers.map((a) => ({ data: a.data, hasMore: a.hasMore })),
    'one event per answer a poll gets, the same entries and hasMore, in the same order')
  const frames = s.events.map((e) => `id: ${e.answer.next}\nevent: changes\ndata: ${JSON.stringify(e.answer)}\n\n`)
  t.equal(s.raw, frames.join(''), 'on the wire: exactly id, event and data on one line, then a blank line, per answer')

  const id = await post(app, 'after the copy')
  const event = await s.event(s.events.length + 1)
  t.same(event.answer.data, [await upsertOf(app, id)], 'a later write is one more event, as soon as it is written')
  t.equal(event.answer.hasMore, false)
  t.equal(event.id, event.answer.next)
  t.equal(s.finish, undefined, 'the stream stays open')
  t.equal(s.incomplete, '', 'nothing waits half-written')

  const resumed = await get(changesUrl(url, { since: event.id }))
  t.same(resumed.body, { data: [], next: (resumed.body as Answer).next, hasMore: false }, 'an event id is a token a poll can follow on with')
})

t.test('not compressed whatever Accept-Encoding says, and each event is on the wire without waiting for more', async (t) => {
  const { app, url } = await listen(t)
  const open = streams(t)
  const alice = await createAuthor(app, 'alice')
  // An initial copy of several KiB: compressible, and more than a compressor would send at once.
  await createMessages(app, alice.id, 40, (i) => ({ content: `message ${i} ${'lorem ipsum '.repeat(20)}` }))
  await quiesce(app)
  let written = 0
  for (const encoding of ['gzip, br', 'br', 'gzip;q=1, identity;q=0', '*']) {
    const s = await open(changesUrl(url), { 'accept-encoding': encoding })
    t.equal(s.status, 200, encoding)
    t.equal(s.headers['content-encoding'], undefined, `Accept-Encoding: ${encoding}: no Content-Encoding`)
    const copy = await s.event(1)
    t.equal(copy.answer.data.length, 40 + written, 'the initial copy arrives as plain text')
    for (let i = 0; i < 2; i++) {
      const id = await post(app, `${encoding} ${i}`)
      written++
      // Nothing else is written until this event has arrived: a buffered stream would never deliver it.
      const event = await s.event(2 + i, PROMPT_MS)
      t.same(event.answer.data, [await upsertOf(app, id)], `event ${i + 2} arrives on its own`)
    }
    t.same(s.malformed, [])
    s.close()
  }
})

t.test('the starting position: Last-Event-ID, else since, else the initial copy', async (t) => {
  const { app, url } = await listen(t)
  const open = streams(t)
  const alice = await createAuthor(app, 'alice')
  await createMessages(app, alice.id, 1)
  const a = await caughtUp(app)
  const x = await post(app, 'x')
  const b = (await follow(app, a)).next

  const sinceOnly = await open(changesUrl(url, { since: a }))
  t.same((await sinceOnly.event(1)).answer.data, [await upsertOf(app, x)], 'since alone: from since')
  const headerOlder = await open(changesUrl(url, { since: b }), { 'last-event-id': a })
  t.same((await headerOlder.event(1)).answer.data, [await upsertOf(app, x)], 'Last-Event-ID older than since: from Last-Event-ID')
  const headerNewer = await open(changesUrl(url, { since: a }), { 'last-event-id': b })
  const none = await open(changesUrl(url))
  t.same((await none.event(1)).answer.data, [await upsertOf(app, 1), await upsertOf(app, x)], 'neither: the initial copy')

  const y = await post(app, 'y')
  t.same((await headerNewer.event(1)).answer.data, [await upsertOf(app, y)], 'Last-Event-ID newer than since: from Last-Event-ID, x is not sent again')
  for (const s of [sinceOnly, headerOlder, none]) t.same((await s.event(2)).answer.data, [await upsertOf(app, y)])
  t.equal(headerNewer.events.length, 1)
})

t.test('answers without changes are not events; a keep-alive comment comes after LIVE_HEARTBEAT_S without an event', async (t) => {
  const { app, url } = await listen(t, { liveHeartbeatS: 1 })
  const open = streams(t)
  const empty = await open(changesUrl(url))
  await empty.until(() => empty.comments.length >= 2, 'two heartbeats')
  t.same(empty.events, [], 'the initial copy of an empty table has no change: no event')
  const [first, second] = empty.comments
  t.match(first?.id, /^[A-Za-z0-9_-]+$/, 'a keep-alive carries the stream\'s position as its id')
  t.equal(empty.raw.slice(0, empty.raw.indexOf('\n\n', empty.raw.indexOf('\n\n') + 2) + 2), `: keep-alive\nid: ${first?.id}\n\n: keep-alive\nid: ${second?.id}\n\n`,
    'a comment line, an id line and a blank line, nothing else')
  const resumed = await get(changesUrl(url, { since: second!.id }))
  t.same(resumed.body, { data: [], next: (resumed.body as Answer).next, hasMore: false }, 'a keep-alive\'s id is a token a poll can go on from')

  await createAuthor(app, 'alice')
  const since = await caughtUp(app)
  const polling = await open(changesUrl(url, { since }))
  await polling.until(() => polling.comments.length >= 2, 'two heartbeats')
  t.same(polling.events, [], 'caught up: the empty answers are not sent')

  const id = await post(app, 'wakes them')
  for (const s of [empty, polling]) {
    const event = await s.event(1)
    t.same(event.answer.data, [await upsertOf(app, id)])
    const at = s.blocks.indexOf(event)
    await s.until(() => s.blocks.length > at + 1, 'a heartbeat after the event')
    t.same(s.blocks.slice(at + 1, at + 2).map((b) => b.kind), ['comment'], 'quiet again: a heartbeat follows')
    t.same(s.malformed, [])
  }
})

t.test('a malformed token is 400 and an expired one 410, as JSON, before any event: in since or in Last-Event-ID', async (t) => {
  const { app, url } = await listen(t)
  const open = streams(t)
  const alice = await createAuthor(app, 'alice')
  await createMessages(app, alice.id, 2)
  const good = await caughtUp(app)

  const refused = async (streamUrl: string, headers: Record<string, string>, status: number, body: unknown, what: string): Promise<void> => {
    const s = await open(streamUrl, headers)
    const text = await s.text()
    t.equal(s.status, status, `${what}: ${status}`)
    t.match(String(s.headers['content-type']), /^application\/json/, `${what}: JSON, not a stream`)
    t.equal(s.headers['cache-control'], 'no-store')
    t.same(JSON.parse(text), body, `${what}: the whole body`)
    t.same(s.events, [])
  }
  for (const token of ['abc', `${good}x`, good.slice(0, 10), 'x'.repeat(500)]) {
    await refused(changesUrl(url, { since: token }), {}, 400, INVALID, `since=${token.slice(0, 20)}`)
    await refused(changesUrl(url), { 'last-event-id': token }, 400, INVALID, `Last-Event-ID: ${token.slice(0, 20)}`)
  }
  await refused(changesUrl(url, { since: good }), { 'last-event-id': 'abc' }, 400, INVALID, 'a malformed Last-Event-ID with a good since')

  await run(app, 'TRUNCATE messages')
  await refused(changesUrl(url, { since: good }), {}, 410, EXPIRED, 'since from before a TRUNCATE')
  await refused(changesUrl(url), { 'last-event-id': good }, 410, EXPIRED, 'Last-Event-ID from before a TRUNCATE')
  const again = await open(changesUrl(url))
  t.equal(again.status, 200, 'starting again without since streams')
})

t.test('LIVE_MAX_CONNECTIONS: one more held request or stream is 503 with Retry-After; one answered at once does not count', async (t) => {
  const { app, url } = await listen(t, { liveMaxConnections: 2 })
  const open = streams(t)
  const alice = await createAuthor(app, 'alice')
  const before = await caughtUp(app)
  await createMessages(app, alice.id, 1)
  const since = (await follow(app, before)).next

  const stream = await open(changesUrl(url, { since }))
  t.equal(stream.status, 200)
  const poll = pending(get(changesUrl(url, { since, wait: '60' })))
  await heldPolls(app, 1)
  await openStreams(app, 1)

  const refusedPoll = await bounded(get(changesUrl(url, { since, wait: '60' })), PROMPT_MS)
  t.equal(refusedPoll.status, 503, 'a third long-poll that would be held')
  t.same(refusedPoll.body, UNAVAILABLE)
  t.match(String(heads(refusedPoll)['retry-after']), /^\d+$/, 'with Retry-After')
  const refusedStream = await open(changesUrl(url, { since }))
  const text = await refusedStream.text()
  t.equal(refusedStream.status, 503, 'a third stream')
  t.same(JSON.parse(text), UNAVAILABLE)
  t.match(String(refusedStream.headers['retry-after']), /^\d+$/)

  // Answered at once: never held, so never counted.
  const copy = await get(changesUrl(url, { wait: '60' }))
  t.equal(copy.status, 200, 'an initial copy with wait')
  const behind = await get(changesUrl(url, { since: before, wait: '60' }))
  t.equal(behind.status, 200, 'a long-poll with a change to answer')
  t.equal((behind.body as Answer).data.length, 1)
  t.equal((await get(changesUrl(url, { since, wait: '0' }))).status, 200, 'wait=0')
  t.equal((await get(changesUrl(url, { since }))).status, 200, 'no wait')

  stream.close()
  await openStreams(app, 0)
  const another = await open(changesUrl(url, { since }))
  t.equal(another.status, 200, 'a closed stream gives its slot back')
  await openStreams(app, 1)

  const full = await bounded(get(changesUrl(url, { since, wait: '60' })), PROMPT_MS)
  t.equal(full.status, 503, 'full again')
  const id = await post(app, 'answers the held one')
  const answered = await bounded(poll.promise, PROMPT_MS)
  t.same((answered.body as Answer).data, [await upsertOf(app, id)])
  await heldPolls(app, 0)
  const aborted = new AbortController()
  t.teardown(() => aborted.abort())
  const third = pending(get(changesUrl(url, { since: (answered.body as Answer).next, wait: '60' }), { signal: aborted.signal }))
  await heldPolls(app, 1)
  t.notOk(third.settled(), 'an answered long-poll gives its slot back')
  aborted.abort()
  await heldPolls(app, 0)
  t.pass('a long-poll whose client went away gives its slot back')
})

t.test('LIVE_MAX_PER_CLIENT: one more from the same address is 429 with Retry-After; another address still gets in', async (t) => {
  const { app, url } = await listen(t, { liveMaxPerClient: 2, trustProxy: 1 })
  const open = streams(t)
  const since = await caughtUp(app)
  const from = (address: string): Record<string, string> => ({ 'x-forwarded-for': address })

  const first = await open(changesUrl(url, { since }), from('203.0.113.7'))
  const aborted = new AbortController()
  t.teardown(() => aborted.abort())
  const poll = pending(get(changesUrl(url, { since, wait: '60' }), { headers: from('203.0.113.7'), signal: aborted.signal }))
  await heldPolls(app, 1)
  await openStreams(app, 1)
  t.equal(first.status, 200)

  const refused = await bounded(get(changesUrl(url, { since, wait: '60' }), { headers: from('203.0.113.7') }), PROMPT_MS)
  t.equal(refused.status, 429, 'a third held request from that address')
  t.same(refused.body, TOO_MANY)
  t.match(String(heads(refused)['retry-after']), /^\d+$/)
  const refusedStream = await open(changesUrl(url, { since }), from('203.0.113.7'))
  t.same(JSON.parse(await refusedStream.text()), TOO_MANY)
  t.equal(refusedStream.status, 429)
  t.match(String(refusedStream.headers['retry-after']), /^\d+$/)
  t.equal((await get(changesUrl(url, { since, wait: '0' }), { headers: from('203.0.113.7') })).status, 200, 'answered at once: not counted')

  const other = await open(changesUrl(url, { since }), from('198.51.100.9'))
  t.equal(other.status, 200, 'another client address is not refused')
  const otherPoll = pending(get(changesUrl(url, { since, wait: '60' }), { headers: from('198.51.100.9'), signal: aborted.signal }))
  await heldPolls(app, 2)
  t.notOk(otherPoll.settled())
  t.notOk(poll.settled())
})

t.test('a read that keeps failing is tried again after growing delays, and logged once per streak', async (t) => {
  const lines: Array<{ level: number, msg: string, read?: string, failures?: number }> = []
  const logs = new Writable({
    write (chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line))
      done()
    }
  })
  const { app, url } = await listen(t, {}, { logger: { level: 'info', stream: logs } })
  const open = streams(t)
  await createAuthor(app, 'alice')
  const since = await caughtUp(app)
  const s = await open(changesUrl(url, { since }))
  const id = await post(app, 'deleted while reads fail')
  await s.event(1, PROMPT_MS)
  const failures = (): typeof lines => lines.filter((l) => l.msg.startsWith('live delivery: reading the change feed failed'))
  const recoveries = (): typeof lines => lines.filter((l) => l.msg.startsWith('live delivery: reading the change feed works again'))
  t.same(failures(), [], 'no failure yet')

  // An answer for the delete joins the authors, renamed away: every read of it fails until they are back.
  await run(app, 'ALTER TABLE users RENAME TO users_away')
  t.teardown(async () => { await run(app, 'ALTER TABLE IF EXISTS users_away RENAME TO users').catch(() => {}) })
  const before = metricValue(await scrape(app), 'live_answer_reads_total') ?? 0
  await run(app, `DELETE FROM messages WHERE id = ${id}`)
  const from = performance.now()
  await untilMetric(async () => await scrape(app), 'live_answer_reads_total', (v) => (v ?? 0) - before >= 5, PROMPT_MS)
  const elapsed = performance.now() - from
  const reads = (metricValue(await scrape(app), 'live_answer_reads_total') ?? 0) - before
  // Tried again after 100 ms, 200 ms, 400 ms ... up to 5 s: at most this many reads fit in the time
  // taken, whatever the machine's speed; at every head read (5 ms) there would be some 200 a second.
  let fit = 1
  for (let waited = 0, delay = 100; waited + delay <= elapsed + 100; waited += delay, delay = Math.min(delay * 2, 5_000)) fit++
  t.ok(reads <= fit + 1, `${reads} reads in ${Math.round(elapsed)} ms (the delays allow ${fit})`)
  t.equal(failures().length, 1, 'one warning for the whole streak')
  t.match(failures()[0], { level: 40, read: 'answer' })
  t.equal(s.events.length, 1, 'nothing sent meanwhile')

  await run(app, 'ALTER TABLE users_away RENAME TO users')
  t.same((await s.event(2, PROMPT_MS)).answer.data, [{ op: 'delete', id }], 'once the reads work, the stream goes on from where it was')
  t.equal(failures().length, 1, 'still one warning')
  t.equal(recoveries().length, 1, 'and one line when the streak ends')
  t.match(recoveries()[0], { level: 30, read: 'answer' })
  t.ok((recoveries()[0]?.failures ?? 0) >= 5, `it says how many reads failed (${recoveries()[0]?.failures})`)
})

t.test('the rate limit counts a held long-poll and an open stream once, when they start', async (t) => {
  const { app, url } = await listen(t, { rateLimitMax: 4 })
  const open = streams(t)
  const alice = await createAuthor(app, 'alice')

  const first = await get(changesUrl(url))
  t.equal(heads(first)['x-ratelimit-remaining'], '3')
  const since = (first.body as Answer).next
  const held = await get(changesUrl(url, { since, wait: '1' }))
  t.equal(held.status, 200, 'held for a second, then answered')
  t.equal(heads(held)['x-ratelimit-remaining'], '2', 'a held long-poll: one request')

  const s = await open(changesUrl(url, { since }))
  t.equal(s.status, 200)
  for (let i = 1; i <= 3; i++) {
    await createMessages(app, alice.id, 1)
    await s.event(i, PROMPT_MS)
  }
  s.close()
  const last = await get(changesUrl(url, { since }))
  t.equal(last.status, 200, 'three events later, the stream still counted once')
  t.equal(heads(last)['x-ratelimit-remaining'], '0')
  const over = await get(changesUrl(url, { since }))
  t.equal(over.status, 429)
  t.same(over.body, TOO_MANY)
})

t.test('CORS: preflights allow Last-Event-ID, and the stream carries Access-Control-Allow-Origin for a listed origin', async (t) => {
  const APP = 'https://app.example.com'
  const { app, url } = await listen(t, { corsOrigins: [APP] })
  const open = streams(t)
  const preflight = await app.inject({
    method: 'OPTIONS',
    url: '/v2/messages/changes',
    headers: { origin: APP, 'access-control-request-method': 'GET', 'access-control-request-headers': 'last-event-id' }
  })
  t.equal(preflight.statusCode, 204)
  t.equal(preflight.headers['access-control-allow-origin'], APP)
  const allowed = String(preflight.headers['access-control-allow-headers']).split(',').map((h) => h.trim().toLowerCase())
  t.ok(allowed.includes('last-event-id'), `Last-Event-ID is allowed (${allowed.join(', ')})`)
  for (const header of ['authorization', 'content-type', 'idempotency-key', 'if-none-match']) t.ok(allowed.includes(header), `and still ${header}`)

  const s = await open(changesUrl(url), { origin: APP })
  t.equal(s.status, 200)
  t.equal(s.headers['access-control-allow-origin'], APP, 'the stream answers the listed origin')
  const unlisted = await open(changesUrl(url), { origin: 'https://evil.example.net' })
  t.equal(unlisted.headers['access-control-allow-origin'], undefined, 'an unlisted origin gets none')
})

t.test('/metrics: held long-polls, open streams, and the delivery delay', async (t) => {
  const { app, url } = await listen(t)
  const open = streams(t)
  await createAuthor(app, 'alice')
  const since = await caughtUp(app)
  const text = await scrape(app)
  t.match(text, /# TYPE live_long_polls_held gauge\n/)
  t.match(text, /# TYPE live_streams_open gauge\n/)
  t.match(text, /# TYPE live_delivery_delay_seconds histogram\n/)
  t.equal(metricValue(text, 'live_long_polls_held'), 0)
  t.equal(metricValue(text, 'live_streams_open'), 0)
  const delivered = metricValue(text, 'live_delivery_delay_seconds_count') ?? 0

  const s = await open(changesUrl(url, { since }))
  const poll = pending(get(changesUrl(url, { since, wait: '60' })))
  t.equal(await heldPolls(app, 1), 1, 'one held long-poll')
  t.equal(await openStreams(app, 1), 1, 'one open stream')
  await post(app, 'delivered twice')
  await s.event(1, PROMPT_MS)
  await bounded(poll.promise, PROMPT_MS)
  await heldPolls(app, 0)
  const after = await scrape(app)
  t.ok((metricValue(after, 'live_delivery_delay_seconds_count') ?? 0) > delivered, 'deliveries are observed')
  t.match(after, /live_delivery_delay_seconds_bucket\{le="[^"]+"\} \d+/)
  s.close()
  await openStreams(app, 0)
})

// On PGlite (one process) the two instances share a throwaway PostgreSQL cluster.
t.test('a write through another instance on the same database wakes a held long-poll and a stream (PostgreSQL)', async (t) => {
  const databaseUrl = await postgresDatabase(t)
  const app = await buildApp(testConfig({ databaseUrl }), { logger: false, testAuth: true })
  t.teardown(() => app.close())
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  const other = await buildApp(testConfig({ databaseUrl }), { logger: false, testAuth: true })
  t.teardown(() => other.close())
  const open = streams(t)
  await createAuthor(app, 'alice')
  const since = await caughtUp(app)
  const s = await open(changesUrl(url, { since }))
  const poll = pending(get(changesUrl(url, { since, wait: '60' })))
  await heldPolls(app, 1)
  const id = await post(other, 'through the other instance')
  const expected = [await upsertOf(app, id)]
  t.same(((await bounded(poll.promise, PROMPT_MS)).body as Answer).data, expected, 'the long-poll')
  t.same((await s.event(1, PROMPT_MS)).answer.data, expected, 'the stream')
})
