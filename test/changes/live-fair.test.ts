// CONTRACT 16 "Live delivery is shared fairly", with CONTRACT 13 "Limits and faults", on real slow
// links (a loopback proxy that passes on what the server sends at 1 KB a second) and real client
// addresses (loopback addresses 127.0.0.x): one address whose slow streams, all still reading, hold
// its share of what the instance keeps unsent does not hold back another client's stream, which gets
// its headers and its events; and with many such addresses at once, every one is answered and the
// total never passes LIVE_UNSENT_BYTES.
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { ANSWER_ROOM_BYTES } from '../../src/changes/live/event-stream.js'
import { LIVE_UNSENT_BYTES, LIVE_UNSENT_KEPT_FREE_PART } from '../../src/memory/budget.js'
import { bounded, NOT_HUNG_MS } from '../helpers/bounded.js'
import { run } from '../helpers/exactness.js'
import { createAuthor } from '../helpers/fixtures.js'
import { changesUrl, LiveCopy, listen, metricValue, openStreams, scrape, streams, type WireStream } from '../helpers/live.js'
import { SlowLink } from '../helpers/slow-link.js'
import { differences, messagesAsServed, quiesce } from '../helpers/sync-client.js'

/** 1 KB a second: slow, but reading. */
const SLOW = 1024
const SLOW_STREAMS = 64
/** An initial copy of answers of about 1 MiB each at limit=1000: 1,200 messages of 12 KB, some 15 MB. */
const ROWS = 1200
/** Far above the test: a slow stream is not closed as stalled while the system's window waits for 64 KiB of reading. */
const STALL_S = 3600
/** What an address holding more than one stream's worth leaves free (src/changes/live/unsent-bytes.ts). */
const KEPT_FREE = LIVE_UNSENT_BYTES / LIVE_UNSENT_KEPT_FREE_PART

async function bigCopy (app: App): Promise<void> {
  const alice = await createAuthor(app, 'alice')
  await run(app, `INSERT INTO messages (content, author_id) SELECT repeat('€', 4000) || ' ' || g, ${alice.id} FROM generate_series(1, ${ROWS}) g`)
  await quiesce(app)
}

/** Waits (in a loop, no clock deciding) until the delivery's own figures satisfy `ok`; returns them. */
async function untilStats (app: App, ok: (stats: ReturnType<App['changes']['stats']>) => boolean, what: string): Promise<ReturnType<App['changes']['stats']>> {
  const deadline = performance.now() + NOT_HUNG_MS
  for (;;) {
    const stats = app.changes.stats()
    if (ok(stats)) return stats
    if (performance.now() > deadline) throw new Error(`${what}: not within ${NOT_HUNG_MS} ms (${JSON.stringify(stats)})`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Opens `count` streams of the initial copy at limit=1000 through `link`, each read at its rate. */
async function slowStreams (t: Test, link: SlowLink, count: number): Promise<WireStream[]> {
  const open = streams(t)
  return await Promise.all(Array.from({ length: count }, async () => await bounded(open(changesUrl(link.url, { limit: '1000' })), NOT_HUNG_MS)))
}

/** The stream's events applied to a copy: throws on anything out of order. */
function copyOf (stream: WireStream, name: string): LiveCopy {
  const copy = new LiveCopy(name)
  for (const event of stream.events) copy.apply(event.answer, `event ${copy.answers + 1}`)
  return copy
}

t.test(`one address holding ${SLOW_STREAMS} streams that read 1 KB/s keeps to its share: another address's stream gets its headers, its first event and its whole copy meanwhile`, async (t) => {
  const { app, url } = await listen(t, { liveStallS: STALL_S })
  await bigCopy(app)
  const table = await messagesAsServed(app)
  const slow = await SlowLink.open(t, url, SLOW)
  const held = await slowStreams(t, slow, SLOW_STREAMS)
  t.same(held.map((s) => s.status), held.map(() => 200), `the ${SLOW_STREAMS} slow streams were answered 200 at once`)

  // Saturated: the slow address holds its share, some of its streams wait for room, and none is closed.
  const full = await untilStats(app, (s) => s.waitingStreams > 0 && s.unsentBytes >= LIVE_UNSENT_BYTES - KEPT_FREE - 2 * ANSWER_ROOM_BYTES, 'the slow address at its share')
  t.comment(`slow address: ${full.unsentBytes} bytes unsent, ${full.waitingStreams} streams waiting for room, ${full.pacedStreams} paced`)

  const open = streams(t)
  const other = await bounded(open(changesUrl(url, { limit: '1000' }), {}, { localAddress: '127.0.0.2' }), NOT_HUNG_MS)
  t.equal(other.status, 200, 'another address\'s stream is answered 200 while the slow address holds its share')
  t.match(String(other.headers['content-type']), /^text\/event-stream/)
  const first = await other.event(1, NOT_HUNG_MS)
  const then = app.changes.stats()
  t.ok(first.answer.data.length > 0 && first.answer.hasMore, 'its first event: the first answer of the copy')
  t.ok(then.waitingStreams > 0, `the slow address's streams still wait for room meanwhile (${then.waitingStreams})`)
  t.ok(then.unsentBytes >= LIVE_UNSENT_BYTES - KEPT_FREE - 3 * ANSWER_ROOM_BYTES, `and it still holds its share (${then.unsentBytes} bytes unsent)`)
  t.same(held.filter((s) => s.finish !== undefined).length, 0, 'every slow stream is still open')

  await other.until(() => other.events.some((e) => !e.answer.hasMore), 'the end of the copy', NOT_HUNG_MS)
  const copy = copyOf(other, 'another address')
  t.strictSame(differences(copy.sorted(), table), { missing: [], extra: [], differ: [] }, `its whole copy (${table.length} rows), exact`)
  t.same(held.filter((s) => s.finish !== undefined).length, 0, 'the slow streams are still open, still reading')
  t.ok(slow.connections.every((c) => c.delivered > 0), 'each of them has read')
  const stats = app.changes.stats()
  t.ok(stats.unsentHighest <= LIVE_UNSENT_BYTES, `never more than LIVE_UNSENT_BYTES unsent (${stats.unsentHighest} at most)`)
  const metrics = await scrape(app)
  t.ok((metricValue(metrics, 'live_unsent_bytes') ?? Infinity) <= LIVE_UNSENT_BYTES, 'live_unsent_bytes within the bound')
  t.ok((metricValue(metrics, 'live_streams_waiting') ?? 0) > 0, 'live_streams_waiting counts the slow address\'s streams waiting for room')
  await openStreams(app, SLOW_STREAMS + 1)
})

const ADDRESSES = Array.from({ length: 12 }, (_, i) => `127.0.0.${10 + i}`)
const STREAMS_EACH = 10

/** Whether the server began writing an event to the connection (its first line has come through the link). */
const eventBegan = (connection: { response: string }): boolean => connection.response.includes('\nevent: changes\n')

t.test(`${ADDRESSES.length} addresses with ${STREAMS_EACH} slow streams each: every address is answered, another client still gets its copy, and the total never passes LIVE_UNSENT_BYTES`, async (t) => {
  const { app, url } = await listen(t, { liveStallS: STALL_S })
  await bigCopy(app)
  const table = await messagesAsServed(app)

  // live_unsent_bytes as an operator sees it, read over the whole test.
  let highestScraped = 0
  const sampling = { on: true }
  const sampler = (async () => {
    while (sampling.on) {
      highestScraped = Math.max(highestScraped, metricValue(await scrape(app), 'live_unsent_bytes') ?? 0)
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
  })()
  t.teardown(async () => {
    sampling.on = false
    await sampler
  })

  const links = await Promise.all(ADDRESSES.map(async (from) => await SlowLink.open(t, url, SLOW, { from })))
  const opening = async (some: SlowLink[]): Promise<WireStream[]> => (await Promise.all(some.map(async (link) => await slowStreams(t, link, STREAMS_EACH)))).flat()
  // Half of them first, until their streams hold all they may and some wait for room; then the rest,
  // who would wait behind those if waiting streams were served first come first served.
  const early = links.slice(0, links.length / 2)
  const late = links.slice(links.length / 2)
  const held = await opening(early)
  await untilStats(app, (s) => s.waitingStreams > 0 && s.unsentBytes >= LIVE_UNSENT_BYTES - KEPT_FREE - 2 * ANSWER_ROOM_BYTES, 'the first addresses holding what they may')
  held.push(...await opening(late))
  t.same(held.map((s) => s.status), held.map(() => 200), `the ${held.length} slow streams were answered 200 at once`)
  await untilStats(app, () => late.every((link) => link.connections.some(eventBegan)), 'an event begun on a stream of every address that came later')
  t.ok(app.changes.stats().waitingStreams > 0, 'every address that came later is written to, ahead of streams that waited before it came')

  const open = streams(t)
  const other = await bounded(open(changesUrl(url, { limit: '1000' }), {}, { localAddress: '127.0.0.2' }), NOT_HUNG_MS)
  t.equal(other.status, 200, 'a stream of another address is answered 200')
  await other.until(() => other.events.some((e) => !e.answer.hasMore), 'the end of the copy', NOT_HUNG_MS)
  t.ok(app.changes.stats().waitingStreams > 0, 'while the slow addresses\' streams still wait for room')
  t.strictSame(differences(copyOf(other, 'another address').sorted(), table), { missing: [], extra: [], differ: [] }, `it gets its whole copy (${table.length} rows), exact`)
  t.same(held.filter((s) => s.finish !== undefined).length, 0, 'every slow stream is still open')

  sampling.on = false
  await sampler
  const { unsentHighest, unsentAddresses } = app.changes.stats()
  t.ok(unsentHighest <= LIVE_UNSENT_BYTES, `never more than LIVE_UNSENT_BYTES unsent over all addresses (${unsentHighest} at most)`)
  t.ok(highestScraped > 0 && highestScraped <= LIVE_UNSENT_BYTES, `live_unsent_bytes never above it either (${highestScraped} at most)`)
  t.ok(unsentAddresses >= ADDRESSES.length, `${unsentAddresses} addresses hold bytes or wait`)
})

t.test('streams with nothing to say hold nothing: the room their first answer took is given back when it says nothing', async (t) => {
  const { app, url } = await listen(t)
  const alice = await createAuthor(app, 'alice')
  await run(app, `INSERT INTO messages (content, author_id) VALUES ('before', ${alice.id})`)
  await quiesce(app)
  const caughtUp = (await bounded(streams(t)(changesUrl(url)), NOT_HUNG_MS))
  const since = (await caughtUp.event(1, NOT_HUNG_MS)).id
  caughtUp.close()
  await openStreams(app, 0)

  const reads = app.changes.stats().answerReads
  const open = streams(t)
  const quiet = await Promise.all(Array.from({ length: 40 }, async (_, i) => await bounded(open(changesUrl(url, { since }), {}, { localAddress: `127.0.0.${2 + (i % 4)}` }), NOT_HUNG_MS)))
  t.same(quiet.map((s) => s.status), quiet.map(() => 200))
  // Each took room for its first answer as it opened; once that answer (no changes) is read, none holds any.
  await untilStats(app, (s) => s.openStreams === 40 && s.answerReads > reads && s.waitingStreams === 0 && s.unsentBytes === 0, 'every quiet stream holding nothing')
  t.equal(app.changes.stats().unsentAddresses, 0, 'no address holds anything')
  await run(app, `INSERT INTO messages (content, author_id) VALUES ('after', ${alice.id})`)
  for (const s of quiet) t.equal((await s.event(1, NOT_HUNG_MS)).answer.data[0]?.message?.content, 'after')
  t.same(quiet.flatMap((s) => s.events).length, 40, 'one event each, the write')
  await untilStats(app, (s) => s.unsentBytes === 0, 'nothing held once the clients have it')
})
