import { readFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { ratio, renderMarkdown, renderSvg, type BenchReport, type Measurement } from '../../bench/report/bench-report.js'
import { freshDatabase } from '../helpers/database.js'
import { renderCurveMarkdown, renderCurveSvg } from '../../bench/report/size-curve.js'
import { pageQuery } from '../../bench/checks/path-queries.js'
import { shuffled } from '../../bench/load/cold-order.js'
import { startWriter } from '../../bench/load/steady-writer.js'
import { copyTimestamp, createProgress, generateMessage, messageContent, rarePhrases, SEARCH_WORDS, seedDatabase } from '../../scripts/seed.js'
import { createRandom } from '../../scripts/seeded-random.js'
import { SERVICE_NODE_ARGS } from '../../scripts/service-args.js'

const measurement = (rps: number, problems: string[] = []): Measurement =>
  ({ requests: rps * 8, rps, p50: 1.5, p99: 12, non2xx: problems.length, errors: 0, peakRssMb: 120, health: { count: 160, failed: 0, p99: 3.25, max: 4.5 }, problems })

const report: BenchReport = {
  date: '2026-01-01T00:00:00.000Z',
  machine: { cpus: 2, cpuModel: 'Test CPU', memoryGb: 8, node: 'v20.0.0', postgres: 'PostgreSQL 15.0', os: 'Linux 6' },
  messages: 1_000_000,
  durationSeconds: 8,
  connections: 50,
  rssLimitMb: 250,
  rows: [
    { key: 'health', name: 'GET /health', results: { service: measurement(30_000), baseline: measurement(36_000), ceiling: measurement(40_000) } },
    { key: 'post', name: 'POST /v2/messages <&>', results: { service: measurement(3000, ['non-2xx responses: 3× 500']), baseline: measurement(1000) } }
  ]
}

t.test('the Markdown table shows ratios, failures and the machine', async (t) => {
  const markdown = renderMarkdown(report)
  t.match(markdown, '| GET /health | 30,000 | 1.50 | 12.0 | 36,000 | 1.50 | 12.0 | 40,000 | 12.0 | 0.83× | 0.75× | 0 / 0 | 3.25 | 120 | ok |')
  t.match(markdown, '| POST /v2/messages <&> | 3,000 FAILED |')
  t.match(markdown, '| 3.00× | — |')
  t.match(markdown, '- POST /v2/messages <&> (service): non-2xx responses: 3× 500')
  t.match(markdown, '2 × Test CPU, 8.0 GB memory, Linux 6, Node v20.0.0, PostgreSQL 15.0')
  t.equal(ratio(measurement(2000), measurement(10)), '200×')
  t.equal(ratio(measurement(1), undefined), '—')
})

t.test('the delta sync table follows the reference table, and its problems are failures', async (t) => {
  const markdown = renderMarkdown({
    ...report,
    rows: [...report.rows, { key: 'sync-poll', name: 'delta sync poll', results: { service: measurement(27_000) }, reference: { key: 'health', target: 0.8 } },
      { key: 'gzip-25', name: 'gzip page', results: { service: measurement(18_000) }, reference: { key: 'health', target: 1.2, measured: measurement(20_000) } },
      { key: 'random-subject', name: 'shed page', results: { service: measurement(40_000, ['non-2xx responses: 4668× 503']) }, reference: { key: 'health', target: 0.1 } }],
    sync: {
      initial: { limit: 1000, messages: 1_000_000, calls: 1001, seconds: 12.5, messagesPerSecond: 80_000, walks: [78_500.4, 80_000, 91_200], peakRssMb: 180, target: 100_000 },
      writes: { count: 1000, seconds: 1.2 },
      catchUp: [
        { limit: 100, entries: 1000, calls: 10, firstMs: 42.25, medianMs: 30.5, runs: 5, missing: 0 },
        { limit: 1000, entries: 1000, calls: 1, firstMs: 9.5, medianMs: 8.25, runs: 5, missing: 3 }
      ],
      problems: ['catch-up with limit 1000, walk 1: 3 of 1000 created ids did not come as an upsert by hasMore=false']
    }
  })
  t.match(markdown, '| delta sync poll | 27,000 | 12.0 | GET /health | 30,000 | 0.90× | ≥ 0.8× | yes |')
  t.match(markdown, '| gzip page | 18,000 | 12.0 | GET /health | 20,000 | 0.90× | ≥ 1.2× | no |', 'against the reference measured again just before')
  t.match(markdown, '| shed page | 40,000 | 12.0 | GET /health | 30,000 | 1.33× | ≥ 0.1× | no (the row failed) |', 'answers that failed meet no target, however many')
  t.ok(markdown.indexOf('| delta sync poll | 27,000 | 12.0 |') < markdown.indexOf('Delta sync, service only'), 'after the reference table')
  t.match(markdown, '| Full initial sync, limit 1000 (median of 3 walks: 78,500, 80,000, 91,200/s) | 1,000,000 | 1,001 | 12.50 s | 80,000 | 180 | ≥ 100,000 messages/s | no |')
  t.match(markdown, '| Catch-up after 1,000 API writes, limit 100 | 1,000 | 10 | 42.3 ms (median of 5: 30.5 ms) | 23,669 | — | — | — |')
  t.match(markdown, '| Catch-up after 1,000 API writes, limit 1000 | 1,000 | 1 | 9.50 ms (median of 5: 8.25 ms) | 105,263 | — | — | 3 created ids missing |')
  t.match(markdown, '- Delta sync: catch-up with limit 1000, walk 1: 3 of 1000 created ids did not come as an upsert by hasMore=false')
  t.notMatch(renderMarkdown(report), 'Delta sync', 'no section when it did not run')
})

t.test('the SVG chart is well formed, escapes names and marks failed bars', async (t) => {
  const svg = renderSvg(report)
  t.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/)
  t.match(svg, 'POST /v2/messages &lt;&amp;&gt;')
  t.notMatch(svg, '<&>')
  t.match(svg, 'fill="#dc2626"')
  t.equal(svg.match(/<rect /g)?.length, 1 + 3 + 2 * 5, 'background, legend, one bar per server and panel')
})

t.test('the Platformatic peer gets columns of its own, and a ratio, only when it ran', async (t) => {
  const withPeer: BenchReport = {
    ...report,
    rows: [
      { key: 'page1-25', name: 'list page 1 (1), limit 25', results: { service: measurement(18_000), baseline: measurement(15), ceiling: measurement(20_000), platformatic: measurement(40) } },
      { key: 'post', name: 'POST /v2/messages', results: { service: measurement(3000), platformatic: measurement(1500, ['answers other than 200: 12× 201']) } }
    ]
  }
  const markdown = renderMarkdown(withPeer)
  t.match(markdown, '| Ceiling req/s | p99 ms | Platformatic req/s | p50 ms | p99 ms | Service ÷ baseline | Service ÷ ceiling | Service ÷ platformatic | Non-2xx')
  t.match(markdown, '| list page 1 (1), limit 25 | 18,000 | 1.50 | 12.0 | 15 | 1.50 | 12.0 | 20,000 | 12.0 | 40 | 1.50 | 12.0 | 1200× | 0.90× | 450× | 0 / 0 | 3.25 | 120 | ok |')
  t.match(markdown, '| POST /v2/messages | 3,000 | 1.50 | 12.0 | — | — | — | — | — | 1,500 FAILED | 1.50 | 12.0 | — | — | 2.00× | 0 / 0 | 3.25 | 120 | ok (a reference failed) |')
  t.match(markdown, '- POST /v2/messages (platformatic): answers other than 200: 12× 201')
  const table = markdown.split('\n').filter((line) => line.startsWith('| Row |') || line.startsWith('|---'))
  t.same(table.map((line) => line.split('|').length - 2), [19, 19], '19 columns, each with its alignment')
  t.notMatch(renderMarkdown(report), 'Platformatic', 'no peer columns when the peer did not run')

  const svg = renderSvg(withPeer)
  t.match(svg, '>platformatic</text>')
  t.match(svg, 'fill="#16a34a"')
  t.equal(svg.match(/<rect /g)?.length, 1 + 4 + 2 * 6, 'background, a legend entry per server, one bar per result and panel')
  t.notMatch(renderSvg(report), 'platformatic')
})

t.test('the search word is in 7.5% of generated messages', async (t) => {
  const random = createRandom(7)
  const n = 40_000
  let hits = 0
  for (let i = 0; i < n; i++) if (messageContent(random).includes('quokka')) hits++
  t.equal(SEARCH_WORDS.quokka, 0.075)
  t.ok(Math.abs(hits / n - 0.075) < 0.005, `share ${hits / n}`)
  const message = generateMessage(random)
  t.ok(['low', 'normal', 'high', 'urgent'].includes(message.priority))
})

t.test('COPY timestamps are the UTC instant, to the millisecond', async (t) => {
  for (const ms of [0, 1_700_000_000_123, 1_735_689_599_999]) {
    const iso = new Date(ms).toISOString()
    t.equal(copyTimestamp(ms), `${iso.slice(0, 10)} ${iso.slice(11, 23)}+00`)
  }
})

t.test('the seed fills an empty database and tops it up with --if-empty', async (t) => {
  // PostgreSQL (COPY) when TEST_DATABASE_URL is set, else an in-memory PGlite (batched inserts).
  const database = await freshDatabase()
  t.teardown(database.drop)
  const first = await seedDatabase({ url: database.url, messages: 300, users: 20, ifEmpty: true, quiet: true })
  t.match(first, { users: 20, newUsers: 20, insertedMessages: 300, totalMessages: 300 })
  if (database.url === 'memory://') return
  const again = await seedDatabase({ url: database.url, messages: 500, users: 20, ifEmpty: true, quiet: true })
  t.match(again, { newUsers: 0, insertedMessages: 200, totalMessages: 500 })
})

t.test('the seed\'s progress: a redrawn bar on a terminal, a line every 10 % in a log', async (t) => {
  const written = (tty: boolean): string[] => {
    const lines: string[] = []
    const stream = { isTTY: tty, write: (text: string) => lines.push(text) } as unknown as NodeJS.WriteStream
    const progress = createProgress(1000, stream)
    for (let done = 0; done <= 1000; done += 50) progress(done)
    return lines
  }
  const log = written(false)
  t.equal(log.length, 10, 'one line a tenth')
  t.match(log[0], /^seed: 10% 100\/1,000 messages, [\d,]+ rows\/s\n$/)
  t.match(log[9], /^seed: 100% 1,000\/1,000 messages/)
  const bar = written(true)
  t.equal(bar.length, 20, 'redrawn at every report but the first')
  t.match(bar[0], /^\r\[#{2}\.{28}\] {3}5% 50\/1,000 messages/)
  t.match(bar[19], /^\r\[#{30}\] 100% 1,000\/1,000 messages, [\d,]+ rows\/s\n$/)
})

t.test('cold rows: a fixed-seed order without repeats, and rare phrases the generator writes', async (t) => {
  const order = shuffled(4000, 1000, 18)
  t.equal(order.length, 1000)
  t.equal(new Set(order).size, 1000, 'no page is asked for twice')
  t.ok(order.every((n) => Number.isInteger(n) && n >= 1 && n <= 4000), 'every value is a page')
  t.same(shuffled(4000, 1000, 18), order, 'the same seed gives the same order, for every server and run')
  t.not(shuffled(4000, 1000, 19).join(), order.join(), 'another seed, another order')
  t.same(shuffled(5, 99, 18).sort((a, b) => a - b), [1, 2, 3, 4, 5], 'asked for more than there are: each once')

  const phrases = rarePhrases()
  t.equal(new Set(phrases).size, phrases.length, 'distinct phrases')
  t.ok(phrases.length > 1000, `${phrases.length} phrases`)
  const random = createRandom(7)
  const texts = Array.from({ length: 20_000 }, () => messageContent(random).toLowerCase())
  const shares = phrases.map((p) => texts.filter((text) => text.includes(p)).length / texts.length)
  t.ok(shares.filter((s) => s > 0).length > phrases.length / 4, 'a good part of them occur in generated messages')
  t.ok(Math.max(...shares) < 0.01, `each is rare: at most ${(Math.max(...shares) * 100).toFixed(2)} % of messages`)
})

t.test('the writer beside a row: one create at a time, at most its rate, every answer counted', async (t) => {
  const seen: Array<{ auth: string | undefined, type: string | undefined, body: string }> = []
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk: Buffer) => { body += chunk.toString() })
    req.on('end', () => {
      seen.push({ auth: req.headers.authorization, type: req.headers['content-type'], body })
      // The fourth create fails, as a create refused by the service would.
      if (seen.length === 4) res.writeHead(503).end('{"error":"busy"}')
      else res.writeHead(201, { location: `/v2/messages/${seen.length}` }).end('{}')
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => { server.close() })
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  // Counted against the time the writer ran, not a fixed wait: the outcome must not depend on the
  // machine's speed (a late timer let 14 creates through a 230 ms wait on a slow day).
  const until = async (done: () => boolean): Promise<void> => {
    for (let waited = 0; !done(); waited += 10) {
      if (waited > 30_000) throw new Error('the writer did not get that far')
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }
  const writer = startWriter(base, 'tok', ['{"content":"a"}', '{"content":"b"}'], 20, 1000)
  await until(() => seen.length >= 5)
  const result = await writer.stop()
  const atMost = Math.floor(result.seconds * 1000 / 20) + 1
  t.ok(seen.length <= atMost, `${seen.length} creates in ${result.seconds.toFixed(2)} s at one per 20 ms: at most ${atMost}`)
  t.equal(result.created + result.failed, seen.length, 'every create sent is counted once')
  t.equal(result.failed, 1)
  t.same(result.problems, ['a write answered 503: {"error":"busy"}'])
  t.same(seen.slice(0, 3).map((s) => s.body), ['{"content":"a"}', '{"content":"b"}', '{"content":"a"}'], 'the bodies in turn')
  t.ok(seen.every((s) => s.auth === 'Bearer tok' && s.type === 'application/json'))

  const before = seen.length
  const bounded = startWriter(base, 'tok', ['{}'], 1, 3)
  await until(() => seen.length - before >= 3)
  // Its loop ends at maxWrites: at one create a millisecond, 100 ms more would show a fourth.
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal((await bounded.stop()).created, 3, 'no more than maxWrites, however long it runs')
  t.equal(seen.length - before, 3)
  const down = startWriter('http://127.0.0.1:9', 'tok', ['{}'], 1, 2)
  await new Promise((resolve) => setTimeout(resolve, 100))
  const failed = await down.stop()
  t.equal(failed.created, 0)
  t.ok(failed.failed >= 1 && failed.problems[0]!.startsWith('a write failed: '), 'a server that does not answer: failures, not a throw')
})

t.test('the /health probe line, and no memory bound on the embedded database', async (t) => {
  const embedded: BenchReport = {
    ...report,
    machine: { ...report.machine, postgres: 'PGlite (PostgreSQL 18.6)' },
    rssLimitMb: undefined,
    rows: [{ key: 'health', name: 'GET /health', results: { service: { ...measurement(30_000), peakRssMb: 480, health: { count: 150, failed: 1, p99: 21.5, max: 30.25 } } } }]
  }
  const markdown = renderMarkdown(embedded)
  t.match(markdown, '| 0 / 0 | 21.5 | 480 | ok |', 'over 250 MB is not flagged when the database is in the process')
  t.match(markdown, 'p99 at most 21.5 ms in a row (the longest probe 30.3 ms), 150 probes, 1 not answered 200.')
  t.match(markdown, 'Peak RSS on the embedded database includes the database itself')
  t.match(renderMarkdown({ ...report, rows: [{ key: 'health', name: 'GET /health', results: { service: { ...measurement(30_000), peakRssMb: 480 } } }] }),
    '| 480 | RSS over 250 MB |', 'on PostgreSQL the bound applies')
})

t.test('a list or search path as the plain query that answers it', async (t) => {
  t.same(pageQuery('/v2/messages?page=7&limit=25'), { where: { text: 'true', params: [] }, orderBy: 'id', page: 7, limit: 25 })
  t.same(pageQuery('/v2/messages?&page=3&sort=createdAt&order=desc&limit=25'), { where: { text: 'true', params: [] }, orderBy: 'created_at desc, id', page: 3, limit: 25 },
    'ties in the sort key go by id ascending, whatever the order (CONTRACT 7)')
  t.same(pageQuery('/v2/messages?sort=id&order=desc'), { where: { text: 'true', params: [] }, orderBy: 'id desc', page: 1, limit: 25 }, 'defaults: page 1, limit 25')
  t.same(pageQuery('/v2/messages?priority=high&authorId=12&subject=Weekly%20sync&sort=subject&page=2&limit=10'), {
    where: { text: 'priority = $1::message_priority and author_id = $2::bigint and subject = $3', params: ['high', '12', 'Weekly sync'] },
    orderBy: 'subject, id',
    page: 2,
    limit: 10
  })
  t.same(pageQuery('/v2/messages/search?q=50%25_off&priority=low&page=1&limit=25').where, {
    text: '(content ilike $1 or subject ilike $1) and priority = $2::message_priority', params: ['%50\\%\\_off%', 'low']
  }, '% and _ in a term match themselves, as the service matches them (CONTRACT 10)')
  t.throws(() => pageQuery('/v2/messages?sort=nope'), /no sort nope/)
})

t.test('the write rows: the database\'s CPU per created message against one large insert, and the groups', async (t) => {
  const post = { ...measurement(2000), databaseUsPerWrite: 400, groups: { groups: 1400, meanSize: 11.6, meanWaitMs: 3.5, meanStatementMs: 11 } }
  const withCost: BenchReport = {
    ...report,
    rows: [{ key: 'post', name: 'POST /v2/messages', results: { service: post, baseline: { ...measurement(1000), databaseUsPerWrite: 150 } } }],
    bulkInsert: { rows: 2000, repeats: 5, usPerRow: 80, each: [95, 80, 75, 80, 85] }
  }
  const markdown = renderMarkdown(withCost)
  t.match(markdown, '2,000-row INSERT … SELECT on the same table: 80.0 µs per row (median of 5: 95.0, 80.0, 75.0, 80.0, 85.0)')
  t.match(markdown, '| POST /v2/messages | service | 400.0 | 5.00× | 1,400 | 11.6 | 3.50 | 11.0 |')
  t.match(markdown, '| POST /v2/messages | baseline | 150.0 | 1.88× | — | — | — | — |', 'the baseline has no groups')
  t.match(renderMarkdown({ ...withCost, bulkInsert: undefined }), 'against one large insert (not measured)')
  t.notMatch(renderMarkdown(report), 'PostgreSQL CPU per created message', 'no section without a measured write row')
  const curve = renderCurveMarkdown([{ ...withCost, size: 100_000 }, { ...withCost, size: 1_000_000, bulkInsert: undefined }])
  t.match(curve, '| PostgreSQL CPU per created message (POST row) | 400 µs (5.00× INSERT … SELECT\'s 80 µs a row) | 400 µs | |')
})

t.test('the size curve: each row at each size, how much costlier on the largest table, and the chart', async (t) => {
  const run = (size: number, idRps: number, subjectRps: number, extra: Partial<BenchReport> = {}): BenchReport => ({
    ...report,
    size,
    messages: size + 1000,
    rows: [
      { key: 'page1-25', name: 'list page 1 (1), limit 25', results: { service: measurement(10_000) } },
      { key: 'random-id', name: `random page of ${size / 25}, sort=id, limit 25`, results: { service: measurement(idRps) } },
      { key: 'random-subject', name: `random page of ${size / 25}, sort=subject, limit 25`, results: { service: measurement(subjectRps, subjectRps < 5 ? ['non-2xx responses: 3× 503'] : []) } }
    ],
    ...extra
  })
  const runs = [
    run(10_000_000, 500, 2, { seed: { messages: 10_000_000, seconds: 361.4 }, databaseBytes: 5_400_000_000 }),
    run(100_000, 800, 250, { seed: { messages: 100_000, seconds: 3.2 }, databaseBytes: 54_000_000 }),
    run(1_000_000, 700, 40)
  ]
  const markdown = renderCurveMarkdown(runs)
  t.match(markdown, '| Row (service req/s) | 100,000 | 1,000,000 | 10,000,000 | Cost 10,000,000 ÷ 100,000 |', 'sizes in order, whatever the order given')
  t.match(markdown, '| list page 1 (1), limit 25 | 10,000 | 10,000 | 10,000 | 1.00× |', 'a warm row: growth without a verdict')
  t.match(markdown, '| random page, sort=id, limit 25 | 800 | 700 | 500 | 1.60× (≤ 2×: yes) |', 'a cold row within twice its cost')
  t.match(markdown, '| random page, sort=subject, limit 25 | 250 | 40 | failed | — |', 'a failed run is not a figure')
  t.match(markdown, '| Seed (messages, time) | 100,000 in 3 s | — | 10,000,000 in 361 s | |')
  t.match(markdown, '| Database on disk | 54 MB | — | 5,400 MB | |')
  t.notMatch(markdown, 'random-search', 'rows no run has are left out')
  const svg = renderCurveSvg(runs)
  t.match(svg, /^<svg /)
  t.equal((svg.match(/<polyline /g) ?? []).length, 3, 'one line per row present')
  t.match(svg, '>10,000,000</text>')
})

t.test('the benchmark starts the service with the node flags of the image', async (t) => {
  const dockerfile = await readFile(new URL('../../Dockerfile', import.meta.url), 'utf8')
  const cmd = /^CMD (\[.*\])$/m.exec(dockerfile)
  t.ok(cmd, 'the Dockerfile has an exec-form CMD')
  t.same(JSON.parse(cmd![1]!), ['node', ...SERVICE_NODE_ARGS, 'dist/src/server.js'])
})
