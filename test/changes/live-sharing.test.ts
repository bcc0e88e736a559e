// CONTRACT 13, "the cost of watching": what the database does for live clients does not grow with
// their number. Forty streams and forty long-polls wait at one position; a write is answered to all of
// them from one read, and the watcher reads the head once per interval however many wait. Counted by
// the service's own counters (live_answer_reads_total, live_watch_queries_total).
import t from 'tap'
import { run } from '../helpers/exactness.js'
import { createAuthor } from '../helpers/fixtures.js'
import { changesUrl, get, heldPolls, listen, metricValue, openStreams, pending, scrape, streams, type Answer } from '../helpers/live.js'
import { bounded } from '../helpers/bounded.js'

const CLIENTS = 40

t.test('one write reaches every waiting client from one read of its answer', async (t) => {
  const { app, url } = await listen(t)
  const alice = await createAuthor(app, 'alice')
  const start = (await get(changesUrl(url))).body as Answer
  t.equal(start.hasMore, false, 'an empty table is copied in one answer')

  const open = streams(t)
  const clients = await Promise.all(Array.from({ length: CLIENTS }, async () => open(changesUrl(url, { since: start.next }))))
  await openStreams(app, CLIENTS)
  const polls = Array.from({ length: CLIENTS }, () => pending(get(changesUrl(url, { since: start.next, wait: '60' }))))
  await heldPolls(app, CLIENTS)

  const before = metricValue(await scrape(app), 'live_answer_reads_total') ?? 0
  await run(app, `INSERT INTO messages (content, author_id) VALUES ('for everyone', ${alice.id})`)

  const answers = await bounded(Promise.all(polls.map(async (poll) => (await poll.promise).body as Answer)), 30_000)
  const events = await Promise.all(clients.map(async (client) => JSON.parse((await client.event(1, 30_000)).data) as Answer))
  for (const answer of [...answers, ...events]) t.same(answer.data.map((entry) => entry.message?.content), ['for everyone'])
  t.equal(new Set([...answers, ...events].map((answer) => answer.next)).size, 1, 'every client got the same answer, with the same next')

  const reads = (metricValue(await scrape(app), 'live_answer_reads_total') ?? 0) - before
  t.ok(reads >= 1 && reads <= 3, `${CLIENTS * 2} clients were answered from ${reads} read(s), not one each`)
})

t.test('the watcher reads the head at its own pace, whether 1 or 40 clients wait', async (t) => {
  const { app, url } = await listen(t, { liveWatchMs: 20 })
  const start = (await get(changesUrl(url))).body as Answer
  const open = streams(t)

  async function headReadsPerSecond (): Promise<number> {
    const from = metricValue(await scrape(app), 'live_watch_queries_total') ?? 0
    const began = performance.now()
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    const to = metricValue(await scrape(app), 'live_watch_queries_total') ?? 0
    return (to - from) / ((performance.now() - began) / 1000)
  }

  await open(changesUrl(url, { since: start.next }))
  await openStreams(app, 1)
  const one = await headReadsPerSecond()
  await Promise.all(Array.from({ length: CLIENTS - 1 }, async () => open(changesUrl(url, { since: start.next }))))
  await openStreams(app, CLIENTS)
  const many = await headReadsPerSecond()
  // At most one read per 20 ms interval: at most 50 a second for any number of clients.
  t.ok(one > 0 && one <= 55, `1 client: ${one.toFixed(1)} head reads a second`)
  t.ok(many > 0 && many <= 55, `${CLIENTS} clients: ${many.toFixed(1)} head reads a second`)
})
