// Issue 19: what overload and expected refusals write to the log. Shed requests become one warn
// summary line a second with their count, never an error line, a stack or a line per request; a real
// failure still logs at error with its stack; a draining probe answer is not an error.
import { Writable } from 'node:stream'
import t, { type Test } from 'tap'
import { buildApp, loggerOptions, type App } from '../../src/app.js'
import type { AppConfig } from '../../src/config.js'
import { createShedCounter, SHED_SUMMARY_INTERVAL_MS } from '../../src/load-shedding/shed-counter.js'
import { testConfig } from '../helpers/build.js'
import { freshDatabase } from '../helpers/database.js'
import { databaseOutage } from '../helpers/outage.js'

type LogLine = Record<string, unknown> & { level: number, msg: string }

const ERROR = 50
const WARN = 40
const INFO = 30
const DEBUG = 20
const SHED = 10_000
const SHED_BODY = '{"error":"Service unavailable"}'

interface LoggedApp {
  app: App
  lines: LogLine[]
  raw: string[]
  /** Closes the app once; the teardown closes it too when a test stopped before. */
  close: () => Promise<void>
}

/** An app whose JSON log lines (at debug, so nothing logged is hidden) are kept in memory. */
async function loggedApp (t: Test, over: Partial<AppConfig> = {}): Promise<LoggedApp> {
  const lines: LogLine[] = []
  const raw: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n').filter((l) => l !== '')) {
        raw.push(line)
        lines.push(JSON.parse(line) as LogLine)
      }
      done()
    }
  })
  const db = await freshDatabase()
  const config = testConfig({ databaseUrl: db.dataDir === undefined ? db.url : undefined, logLevel: 'debug', ...over })
  const app = await buildApp(config, { logger: { ...(loggerOptions(config) as Record<string, unknown>), stream }, dataDir: db.dataDir })
  let closed: Promise<void> | undefined
  const close = async (): Promise<void> => { closed ??= app.close(); await closed }
  t.teardown(async () => { await close(); await db.drop() })
  return { app, lines, raw, close }
}

function blockEventLoop (ms: number): void {
  const until = Date.now() + ms
  while (Date.now() < until) { /* the overload being simulated */ }
}

const sleep = async (ms: number): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, ms)) }

t.test(`${SHED} shed requests: 503 each, one warn summary a second at most, counts adding up exactly`, async (t) => {
  const { app, lines, raw, close } = await loggedApp(t, { maxEventLoopDelayMs: 100 })
  await app.ready()

  // Overload is measured by samples every 250 ms and counts from two samples after ready (start-up
  // stalls are not overload): block the loop, past that arming delay, until a sample has seen it.
  // The state then holds until the next sample, and every inject below is dispatched, its onRequest
  // hooks included, before any timer can run again, so all of them see that same state.
  let attempt = 0
  do {
    blockEventLoop(800)
    await sleep(5)
  } while (!app.isUnderPressure() && ++attempt < 8)
  t.ok(app.isUnderPressure(), 'the blocked loop is measured as overload')

  const before = lines.length
  const started = performance.now()
  const responses = await Promise.all(Array.from({ length: SHED }, async (_, i) =>
    await app.inject({ url: '/v2/hello', headers: { 'x-request-id': `shed-${i}` } })))

  const wrong = responses.filter((r) => r.statusCode !== 503 || r.body !== SHED_BODY || r.headers['retry-after'] !== '1')
  t.equal(wrong.length, 0, `every request is shed: 503 ${SHED_BODY} with Retry-After: 1 (${JSON.stringify(wrong.slice(0, 2).map((r) => [r.statusCode, r.body]))})`)
  const first = responses[0]
  t.equal(first?.headers['cache-control'], 'no-store')
  t.equal(first?.headers['x-request-id'], 'shed-0', 'the usual headers, the request id included')
  t.equal(first?.headers['content-type'], 'application/json; charset=utf-8')

  // Metrics still count every shed request: scraped once the pressure is gone, so the scrape itself is not shed.
  for (let i = 0; i < 100 && app.isUnderPressure(); i++) await sleep(50)
  const scrape = await app.inject({ url: '/metrics', headers: { 'x-request-id': 'scrape' } })
  t.equal(scrape.statusCode, 200)
  t.match(scrape.body, new RegExp(`\\nhttp_request_duration_seconds_count\\{method="GET",route="/v2/hello",status_code="503"\\} ${SHED}\\n`),
    'the duration histogram counts every shed request')

  // Whatever is still pending is written on close.
  await close()
  const elapsedSeconds = (performance.now() - started) / 1000
  const during = lines.slice(before)
  const summaries = during.filter((l) => l.msg.startsWith('load shed:'))
  const others = during.filter((l) => !l.msg.startsWith('load shed:'))

  t.ok(summaries.length >= 1, `${summaries.length} summary lines in ${elapsedSeconds.toFixed(1)} s`)
  t.ok(summaries.length <= Math.ceil(elapsedSeconds * 1000 / SHED_SUMMARY_INTERVAL_MS) + 1, 'one summary line a second at most, plus the one on close')
  t.equal(summaries.reduce((sum, l) => sum + (typeof l.shed === 'number' ? l.shed : NaN), 0), SHED, 'the summary counts add up to exactly the requests shed')
  for (const line of summaries) {
    t.equal(line.level, WARN)
    t.ok(Number.isInteger(line.shed) && (line.shed as number) > 0, `shed is a positive count (${String(line.shed)})`)
    t.equal(line.msg, `load shed: answered 503 to ${String(line.shed)} requests in the last 1 s`)
    t.notOk('err' in line || 'reqId' in line, 'a summary names no error and no request')
  }
  // The one other line is the scrape's own request line: nothing per shed request, at any level.
  t.same(others.map((l) => [l.level, l.msg, l.reqId]), [[INFO, 'request', 'scrape']])
  t.equal(during.length, summaries.length + 1, 'the log grew by the summaries and the scrape line only')
  t.notOk(lines.some((l) => l.level >= ERROR), 'no error line')
  t.notOk(raw.some((l) => l.includes('"stack"')), 'no stack in any line')
  t.notOk(lines.some((l) => typeof l.reqId === 'string' && l.reqId.startsWith('shed-')), 'no line for any single shed request')
})

t.test('the counter: one line per interval at most, with the count of that interval; the rest on flush', async (t) => {
  const written: Array<{ shed: number, msg: string }> = []
  const intervalMs = 100
  const counter = createShedCounter({ warn: (fields, msg) => { written.push({ ...fields, msg }) } }, intervalMs)
  counter.flush()
  t.same(written, [], 'nothing shed: no line')

  // A steady stream of refusals for about five intervals, and on until two lines were written (a busy
  // machine only makes it longer), up to 2,000 refusals: 2 ms apart at least, forty intervals.
  const started = performance.now()
  let added = 0
  while ((performance.now() - started < 5 * intervalMs || written.length < 2) && added < 2_000) {
    counter.add()
    added++
    await sleep(2)
  }
  const elapsedMs = performance.now() - started
  const beforeFlush = written.length
  counter.flush()
  t.ok(beforeFlush >= 2, `lines were written while shedding went on (${beforeFlush})`)
  t.ok(written.length <= Math.ceil(elapsedMs / intervalMs) + 1, `${written.length} lines for ${Math.round(elapsedMs)} ms: one per interval at most, plus the flush`)
  t.equal(written.reduce((sum, l) => sum + l.shed, 0), added, `the counts add up to the ${added} requests shed`)
  t.ok(written.every((l) => l.shed > 0 && l.msg === `load shed: answered 503 to ${l.shed} requests in the last 0.1 s`))

  const total = written.length
  counter.flush()
  await sleep(2 * intervalMs)
  t.equal(written.length, total, 'nothing pending: no further line, no timer left running')
})

t.test('nothing shed, no summary: closing an app that shed nothing writes no summary line', async (t) => {
  const { app, lines, close } = await loggedApp(t, { maxEventLoopDelayMs: 100 })
  t.equal((await app.inject({ url: '/health' })).statusCode, 200)
  await close()
  t.same(lines.filter((l) => l.msg.startsWith('load shed:')), [])
})

t.test('an unexpected 500 still logs at error with its stack', async (t) => {
  const { app, lines } = await loggedApp(t)
  // A route that fails as a bug would; registered on this instance only.
  app.get('/test/unexpected', async () => { throw new Error('unexpected failure 7f3a') })
  const response = await app.inject({ url: '/test/unexpected', headers: { 'x-request-id': 'boom-1' } })
  t.equal(response.statusCode, 500)
  t.same(response.json(), { error: 'Internal server error' })
  const mine = lines.filter((l) => l.reqId === 'boom-1')
  t.same(mine.map((l) => [l.level, l.msg]), [[ERROR, 'request failed'], [INFO, 'request']])
  const err = mine[0]?.err as { message?: string, stack?: string } | undefined
  t.equal(err?.message, 'unexpected failure 7f3a')
  t.match(err?.stack, /^Error: unexpected failure 7f3a\n\s+at /, 'the full stack, server-side')
})

t.test('the draining /health/ready 503 is a debug line, not an error, and has no stack', async (t) => {
  const { app, lines, raw } = await loggedApp(t)
  app.drain()
  const response = await app.inject({ url: '/health/ready', headers: { 'x-request-id': 'drain-1' } })
  t.equal(response.statusCode, 503)
  t.same(response.json(), { error: 'Service unavailable' })
  const mine = lines.filter((l) => l.reqId === 'drain-1')
  t.same(mine.map((l) => [l.level, l.msg]), [[DEBUG, 'request rejected'], [INFO, 'request']])
  t.match(mine[0], { code: 'API_DRAINING', reason: 'Service unavailable', statusCode: 503 })
  t.notOk('err' in (mine[0] ?? {}), 'no error object')
  t.match(mine[1], { route: '/health/ready', statusCode: 503 })
  t.notOk(raw.some((l) => l.includes('drain-1') && l.includes('"stack"')), 'no stack')
})

t.test('a database outage on /health/ready is one error line carrying the driver\'s error as cause', async (t) => {
  const { app, lines } = await loggedApp(t)
  await app.ready()
  const outage = await databaseOutage(t, app)
  await outage.begin()
  const response = await app.inject({ url: '/health/ready', headers: { 'x-request-id': 'outage-1' } })
  await outage.end()
  t.equal(response.statusCode, 503)
  t.same(response.json(), { error: 'Database unavailable' })
  const mine = lines.filter((l) => l.reqId === 'outage-1')
  t.same(mine.map((l) => [l.level, l.msg]), [[ERROR, 'request failed'], [INFO, 'request']], 'one error line, no separate warn line')
  const err = mine[0]?.err as { message?: string, stack?: string, code?: string } | undefined
  t.equal(err?.code, 'API_DATABASE_UNAVAILABLE')
  t.match(err?.message, /^Database unavailable: \S/, 'the message names the cause')
  t.match(err?.stack, /caused by: /, 'the stack includes the cause')
})
