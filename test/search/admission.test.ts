import type { LightMyRequestResponse } from 'fastify'
import t from 'tap'
import { HEAVY_READS, HEAVY_READS_PER_CLIENT, HEAVY_READS_WAITING_PER_CLIENT, heavyRead, heavyReadCounts } from '../../src/db/heavy-reads.js'
import { NOT_HUNG_MS } from '../helpers/bounded.js'
import { build } from '../helpers/build.js'
import { createAuthor, createMessages } from '../helpers/fixtures.js'
import { metricValue, scrape } from '../helpers/live.js'

// CONTRACT 16, through the app: a flood of searches from one address is answered 503 with Retry-After
// at once, while a search from another address and the cheap requests (an item, page 1, a create) are
// answered 2xx. Other clients' long reads are stood in for by reads of the test's own that hold places
// of the same gate (the app's database handle) until the test lets them end: no clock decides.

const FLOODER = '203.0.113.1'
const BYSTANDER = '203.0.113.2'
const WRITER = '203.0.113.3'
const REFUSED = { status: 503, retryAfter: '1', body: { error: 'Service unavailable' } }

/** Waits, with a generous bound, until `done` holds. */
async function until (done: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + NOT_HUNG_MS
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`not within ${NOT_HUNG_MS} ms: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

const answer = (res: LightMyRequestResponse) => res.statusCode === 503
  ? { status: 503, retryAfter: res.headers['retry-after'], body: res.json() }
  : { status: res.statusCode }

t.test('a flood of searches from one address is refused at once; another address\'s search and cheap requests are answered', async (t) => {
  const app = await build(t, { testAuth: true })
  const alice = await createAuthor(app, 'alice')
  const [first] = await createMessages(app, alice.id, 5, (i) => ({ content: `flood message ${i}` }))

  // Every place taken, by clients whose share it is (two each).
  const holders = Array.from({ length: HEAVY_READS }, (_, n) => {
    let end!: () => void
    const ended = new Promise<void>((resolve) => { end = resolve })
    const done = heavyRead(app.db, { address: `198.51.100.${Math.floor(n / HEAVY_READS_PER_CLIENT)}` }, async () => { await ended })
    return { end, done }
  })
  const base = heavyReadCounts()

  const answers: Array<ReturnType<typeof answer>> = []
  const flood = (count: number, from: number) => Array.from({ length: count }, async (_, n) => {
    const res = await app.inject({ method: 'GET', url: `/v2/messages/search?q=zq${from + n}`, remoteAddress: FLOODER })
    answers.push(answer(res))
    return answer(res)
  })
  const firstWave = flood(10, 0)
  const refusedNow = 10 - HEAVY_READS_WAITING_PER_CLIENT
  await until(() => answers.length === refusedNow, `${refusedNow} of the flood answered`)
  t.same(answers, Array.from({ length: refusedNow }, () => REFUSED), 'beyond what its client may hold waiting, each search is refused at once, with Retry-After')
  t.equal(heavyReadCounts().waiting - base.waiting, HEAVY_READS_WAITING_PER_CLIENT, 'the rest wait for a place')

  // Three places free: the flood's waiters take two of them, its share; the third stays free for others.
  for (const holder of holders.slice(0, 3)) holder.end()
  const secondWave = flood(6, 10)
  const search = await app.inject({ method: 'GET', url: '/v2/messages/search?q=flood', remoteAddress: BYSTANDER })
  t.equal(search.statusCode, 200, 'a search from another address runs in a free place')
  t.equal(search.json().pagination.total, 5)

  const user = { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User' }) }
  const cheap = await Promise.all([
    app.inject({ method: 'GET', url: `/v2/messages/${first!.id}`, remoteAddress: WRITER }),
    app.inject({ method: 'GET', url: '/v2/messages?limit=25', remoteAddress: WRITER }),
    app.inject({ method: 'POST', url: '/v2/messages', headers: user, payload: { content: 'written during the flood' }, remoteAddress: WRITER })
  ])
  t.same(cheap.map((res) => res.statusCode), [200, 200, 201], 'an item, page 1 and a create are answered meanwhile')

  for (const holder of holders.slice(3)) holder.end()
  await Promise.all(holders.map(async (holder) => await holder.done))
  const all = [...await Promise.all(firstWave), ...await Promise.all(secondWave)]
  t.same(all.filter((a) => a.status !== 200 && JSON.stringify(a) !== JSON.stringify(REFUSED)), [], 'every answer to the flood is a page or the 503')
  t.ok(all.filter((a) => a.status === 503).length >= refusedNow + 2, 'and the second wave is refused beyond its client\'s share too')
  t.ok((metricValue(await scrape(app), 'db_heavy_reads_shed_total') ?? 0) >= refusedNow + 2, 'the refusals are counted')
})
