// CONTRACT 11 on a listening server: load shedding, probes exempt from limits, /metrics, and the
// one log line per request.
import { Writable } from 'node:stream'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { buildApp, loggerOptions, type App } from '../../src/app.js'
import type { AppConfig } from '../../src/config.js'
import { testConfig } from '../helpers/build.js'
import { freshDatabase } from '../helpers/database.js'
import { startTestIdp } from '../helpers/idp.js'
import { processDatabase, startServer } from '../helpers/server-process.js'

const AUDIENCE = 'messages-api-test'

async function listening (t: Test, over: Partial<AppConfig>, logger?: Parameters<typeof buildApp>[1]): Promise<{ app: App, url: string }> {
  const db = await freshDatabase()
  // Shedding only where a test asks for it: a loaded test machine must not shed the others.
  const app = await buildApp(testConfig({ databaseUrl: db.dataDir === undefined ? db.url : undefined, maxEventLoopDelayMs: 0, ...over }), { ...logger, dataDir: db.dataDir })
  t.teardown(async () => { await app.close(); await db.drop() })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  return { app, url }
}

async function get (url: string, headers: Record<string, string> = {}): Promise<{ status: number, headers: Record<string, unknown>, text: string }> {
  const response = await request(url, { headers })
  return { status: response.statusCode, headers: response.headers, text: await response.body.text() }
}

function blockEventLoop (ms: number): void {
  const until = Date.now() + ms
  while (Date.now() < until) { /* the overload being simulated */ }
}

t.test('a blocked event loop sheds requests with 503 and Retry-After; probes still answer', async (t) => {
  const { url } = await listening(t, { maxEventLoopDelayMs: 200 })
  // Overload is measured by samples every 250 ms: block the loop until a request arrives while the
  // service knows it is behind (a few tries at most), and ask the probes at that same moment.
  let shed = { status: 0, text: '', headers: {} as Record<string, unknown> }
  let health = shed
  let ready = shed
  for (let attempt = 0; attempt < 8 && shed.status !== 503; attempt++) {
    blockEventLoop(800)
    await new Promise((resolve) => setTimeout(resolve, 5))
    ;[shed, health, ready] = await Promise.all([get(`${url}/v2/hello`), get(`${url}/health`), get(`${url}/health/ready`)])
  }
  t.equal(shed.status, 503)
  t.same(JSON.parse(shed.text), { error: 'Service unavailable' })
  t.equal(shed.headers['retry-after'], '1')
  t.equal(health.status, 200, '/health is exempt')
  t.equal(ready.status, 200, '/health/ready is exempt')
})

t.test('a process that has just started does not shed: start-up work is not overload', async (t) => {
  // Migrations and route compilation stall the loop before the server is ready; the samples that
  // saw them must not turn the first requests away. 50 ms is far below the stall of a start-up.
  const db = await processDatabase(t)
  const server = await startServer(t, { ...db.env, AUTH_ISSUER: 'http://127.0.0.1:9', MAX_EVENT_LOOP_DELAY_MS: '50' }, db.cwd)
  const statuses: number[] = []
  const until = Date.now() + 1_000
  while (Date.now() < until) statuses.push((await get(`${server.url}/v2/movies?limit=1`)).status)
  t.ok(statuses.length > 5, `${statuses.length} requests in the first second`)
  t.same([...new Set(statuses)], [200], 'every request in the first second is served')
  server.child.kill('SIGTERM')
  t.same(await server.exited, { code: 0, signal: null })
})

t.test('the probes are never rate limited', async (t) => {
  const { url } = await listening(t, { rateLimitMax: 2 })
  const statuses = []
  for (let i = 0; i < 6; i++) statuses.push((await get(`${url}/health`)).status, (await get(`${url}/health/ready`)).status)
  t.same(statuses, Array(12).fill(200))
})

t.test('/health/ready answers 503 once draining has begun', async (t) => {
  const { app, url } = await listening(t, {})
  t.equal((await get(`${url}/health/ready`)).status, 200)
  app.drain()
  const response = await app.inject({ url: '/health/ready' })
  t.equal(response.statusCode, 503)
  t.same(response.json(), { error: 'Service unavailable' })
  t.equal(response.headers.connection, 'close', 'draining responses close their connection')
})

t.test('GET /metrics: token, route patterns, counters and pool gauges; not in OpenAPI', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const { app, url } = await listening(t, { metricsToken: 's3cret', authIssuer: idp.url, apiAudience: AUDIENCE })
  const attempts: Array<Record<string, string>> = [{}, { authorization: 'Bearer wrong' }]
  for (const headers of attempts) {
    const denied = await get(`${url}/metrics`, headers)
    t.equal(denied.status, 401)
    t.same(JSON.parse(denied.text), { error: 'Invalid or missing token' })
    t.equal(denied.headers['www-authenticate'], 'Bearer realm="metrics"')
  }
  const token = await idp.sign({ sub: 'metrics-user', role: 'Admin', email: 'm@example.com', name: 'M' })
  t.equal((await get(`${url}/v2/messages/424242`, { authorization: `Bearer ${token}` })).status, 404)
  t.equal((await get(`${url}/no/such/route/x9f1`)).status, 404)
  const created = await request(`${url}/v2/messages`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{"content":"hi"}' })
  t.equal(created.statusCode, 201, 'a first write provisions the caller through userinfo')
  await created.body.dump()
  const scrape = await get(`${url}/metrics`, { authorization: 'Bearer s3cret' })
  t.equal(scrape.status, 200)
  t.match(String(scrape.headers['content-type']), /^text\/plain/)
  t.match(scrape.text, /process_cpu_user_seconds_total/)
  t.match(scrape.text, /http_request_duration_seconds_bucket\{le="0.005",method="GET",route="\/v2\/messages\/:id",status_code="404"\}/)
  t.match(scrape.text, /route="unmatched",status_code="404"/)
  t.notMatch(scrape.text, /424242|x9f1/, 'raw URLs never become labels')
  t.match(scrape.text, /auth_jwks_fetches_total 1\n/, 'one key-set fetch for the one token')
  t.match(scrape.text, /auth_userinfo_requests_total [1-9]/)
  t.match(scrape.text, /db_pool_max_connections \d+/)
  t.match(scrape.text, /db_connections\{state="active"\} \d+/)
  t.match(scrape.text, /db_heavy_reads\{state="running"\} 0\n/, 'no heavy read running once the requests are answered')
  t.match(scrape.text, /db_heavy_reads\{state="waiting"\} 0\n/)
  // The one create went as groups of one: a first statement found no local user yet, and once the
  // caller was provisioned, a second one wrote the message.
  t.match(scrape.text, /message_write_group_size_bucket\{le="1"\} 2\n/)
  t.match(scrape.text, /message_write_group_size_sum 2\nmessage_write_group_size_count 2\n/)
  t.match(scrape.text, /message_write_group_wait_seconds_count 2\n/)
  t.match(scrape.text, /message_write_group_statement_seconds_count 2\n/)
  t.notOk(Object.hasOwn((app.swagger() as { paths: Record<string, unknown> }).paths, '/metrics'), 'hidden from the OpenAPI document')
})

t.test('one JSON line per request with id, route, status, duration and subject; never the token', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const lines: Array<Record<string, unknown>> = []
  const raw: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n').filter((l) => l !== '')) { raw.push(line); lines.push(JSON.parse(line) as Record<string, unknown>) }
      done()
    }
  })
  const config = testConfig({ authIssuer: idp.url, apiAudience: AUDIENCE, logLevel: 'info' })
  const options = loggerOptions(config) as Record<string, unknown>
  const { url } = await listening(t, { authIssuer: idp.url, apiAudience: AUDIENCE, logLevel: 'info' }, { logger: { ...options, stream } })
  const token = await idp.sign({ sub: 'log-user', role: 'Admin', email: 'l@example.com', name: 'L' })
  const response = await request(`${url}/v2/hello`, { headers: { authorization: `Bearer ${token}`, 'x-request-id': 'req-log-1' } })
  t.equal(response.statusCode, 200)
  await response.body.dump()
  await new Promise((resolve) => setTimeout(resolve, 50))
  const mine = lines.filter((l) => l.reqId === 'req-log-1')
  t.equal(mine.length, 1, `one line for the request (${JSON.stringify(mine)})`)
  t.match(mine[0], { level: 30, msg: 'request', method: 'GET', route: '/v2/hello', statusCode: 200, sub: 'log-user', durationMs: Number })
  t.notOk(raw.some((line) => line.includes(token) || line.includes(token.split('.')[2] ?? 'none')), 'the token appears in no log line')
})
