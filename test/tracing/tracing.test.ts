import { randomBytes } from 'node:crypto'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { loadConfig, type AppConfig } from '../../src/config.js'
import { freePort } from '../../scripts/free-port.js'
import { build } from '../helpers/build.js'
import { startTestIdp, type TestIdp } from '../helpers/idp.js'
import { changesUrl, clientsOf, get, heldPolls, pending, scrape, metricValue, streams } from '../helpers/live.js'
import { startOtlpReceiver, type ExportedSpan, type OtlpReceiver } from '../helpers/otlp-receiver.js'
import { quiesce } from '../helpers/sync-client.js'
import { renderTrace } from '../helpers/trace-tree.js'

// CONTRACT 15 against a real OTLP/HTTP receiver on loopback (test/helpers/otlp-receiver.ts): what the
// exporter sends, in both encodings, decoded as a collector decodes it. Each app starts the SDK and
// stops it when it closes, so the subtests, which run one after another, each trace on their own.

const AUDIENCE = 'backend-3-messages'
const SERVER = 2
const CLIENT = 3
const PRIMARY_WAIT = 'wait for database primary'
const ALICE = { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User', name: 'Alice' }) }

/** Tracing to `endpoint` as the environment would ask for it, with exports every few milliseconds. */
function tracingTo (endpoint: string, env: Record<string, string> = {}): AppConfig['tracing'] {
  return loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_BSP_SCHEDULE_DELAY: '10', ...env }).tracing
}

interface LogLine { level: number, msg: string, trace_id?: string, span_id?: string, [key: string]: unknown }

/** A pino logger writing into `lines`. */
function capture (lines: LogLine[]): { level: string, stream: { write: (line: string) => void } } {
  return { level: 'info', stream: { write: (line) => { lines.push(JSON.parse(line) as LogLine) } } }
}

/** A fresh W3C trace context of a caller, sampled. */
function caller (): { traceId: string, spanId: string, traceparent: string } {
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` }
}

async function listening (t: Test, app: App): Promise<string> {
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  clientsOf(t, url)
  return url
}

const serverSpanOf = (spans: readonly ExportedSpan[]): ExportedSpan | undefined => spans.find((span) => span.kind === SERVER)
const isStatement = (span: ExportedSpan): boolean => span.attributes['db.system.name'] === 'postgresql' && span.kind === CLIENT
const statementsOf = (spans: readonly ExportedSpan[]): ExportedSpan[] => spans.filter(isStatement)

/** Whether `span` sits under `ancestor` in `spans`. */
function under (spans: readonly ExportedSpan[], span: ExportedSpan, ancestor: ExportedSpan): boolean {
  const byId = new Map(spans.map((s) => [s.spanId, s]))
  for (let at = byId.get(span.parentSpanId); at !== undefined; at = byId.get(at.parentSpanId)) if (at === ancestor) return true
  return false
}

/** Waits for the trace whose server span is named `name`, and returns all its spans (the server span ends last). */
async function traceOf (receiver: OtlpReceiver, traceId: string, name: string): Promise<ExportedSpan[]> {
  await receiver.waitFor(`the trace of ${name}`, (spans) => spans.some((span) => span.traceId === traceId && span.kind === SERVER && span.name === name))
  return receiver.trace(traceId)
}

t.test('a POST with traceparent is one trace: the server span under the caller\'s, statements, the key set, userinfo and provisioning under it', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const idp: TestIdp = await startTestIdp(t, { audience: AUDIENCE })
  const outbound: Record<string, IncomingHttpHeaders> = {}
  idp.jwksHandler = ({ request, defaultReply }) => { outbound.jwks = request.headers; return defaultReply }
  idp.userinfoHandler = ({ request, defaultReply }) => { outbound.userinfo = request.headers; return defaultReply }
  const lines: LogLine[] = []
  const app = await build(t, { logger: capture(lines), config: { authIssuer: idp.url, apiAudience: AUDIENCE, tracing: tracingTo(receiver.url) } })
  const url = await listening(t, app)
  const token = await idp.sign({ sub: 'grace', role: 'User', email: 'grace@example.com', name: 'Grace' })
  const { traceId, spanId, traceparent } = caller()

  const res = await fetch(`${url}/v2/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', traceparent, tracestate: 'vendor=opaque' },
    body: JSON.stringify({ content: 'Tracing the first message' })
  })
  t.equal(res.status, 201)
  const message = await res.json() as { author: { id: number } }
  const spans = await traceOf(receiver, traceId, 'POST /v2/messages')
  t.ok(receiver.requests.every((request) => request.contentType === 'application/x-protobuf' && request.path === '/v1/traces'), 'http/protobuf, the default, to …/v1/traces')

  const server = serverSpanOf(spans)
  if (server === undefined) throw new Error('no server span')
  t.equal(spans.filter((span) => span.kind === SERVER).length, 1, 'one server span')
  t.equal(server.parentSpanId, spanId, 'the server span is a child of the caller\'s span')
  t.match(server.attributes, {
    'http.request.method': 'POST',
    'http.route': '/v2/messages',
    'url.path': '/v2/messages',
    'url.scheme': 'http',
    'network.protocol.version': '1.1',
    'http.response.status_code': 201
  })
  t.ok(spans.every((span) => span === server || under(spans, span, server)), 'every other span of the trace is under the server span')
  t.equal(server.resource['service.name'], 'messages-api', 'OTEL_SERVICE_NAME\'s default')

  const statements = statementsOf(spans)
  t.ok(statements.length >= 3, `statement spans (${statements.length})`)
  for (const statement of statements) {
    t.match(statement.attributes, { 'db.operation.name': /^(SELECT|INSERT|UPDATE|DELETE)$/, 'db.query.text': String, 'messages_api.db.role': 'primary' })
  }
  t.ok(statements.some((statement) => statement.name === 'INSERT messages' && /\$1/.test(String(statement.attributes['db.query.text']))), 'the insert, its values as parameters')

  const provisioning = spans.find((span) => span.name === 'provision local user')
  if (provisioning === undefined) throw new Error('no provisioning span')
  t.equal(provisioning.parentSpanId, server.spanId, 'provisioning is a step of the request')
  t.equal(provisioning.attributes['user.id'], message.author.id, 'the user by local id')
  const userinfo = spans.find((span) => span.kind === CLIENT && span.attributes['url.path'] === '/v2/oauth/userinfo')
  if (userinfo === undefined) throw new Error('no userinfo span')
  t.equal(userinfo.parentSpanId, provisioning.spanId, 'userinfo is called while provisioning')
  t.match(userinfo.attributes, { 'http.request.method': 'GET', 'http.response.status_code': 200, 'server.address': '127.0.0.1' })
  t.ok(statements.some((statement) => statement.name === 'INSERT users' && statement.parentSpanId === provisioning.spanId), 'the upsert under provisioning')
  const jwks = spans.find((span) => span.kind === CLIENT && span.attributes['url.path'] === '/.well-known/jwks.json')
  if (jwks === undefined) throw new Error('no key set span')
  t.equal(jwks.parentSpanId, server.spanId, 'the key set is fetched for the request')

  t.equal(outbound.userinfo?.traceparent, `00-${traceId}-${userinfo.spanId}-01`, 'userinfo carries traceparent on')
  t.equal(outbound.userinfo?.tracestate, 'vendor=opaque', 'and the caller\'s tracestate')
  t.equal(outbound.jwks?.traceparent, `00-${traceId}-${jwks.spanId}-01`, 'the key set fetch carries traceparent on')

  const requestLine = lines.find((line) => line.msg === 'request' && line.method === 'POST')
  t.match(requestLine, { trace_id: traceId, span_id: server.spanId }, 'the request\'s log line carries its trace')
  t.comment(`POST /v2/messages, first use of a subject:\n${renderTrace(spans, { durations: true })}`)
})

t.test('a provisioning that fails is an error span, with the upstream\'s status on its call', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  idp.userinfoHandler = () => ({ status: 500, body: { error: 'down' } })
  const app = await build(t, { config: { authIssuer: idp.url, apiAudience: AUDIENCE, tracing: tracingTo(receiver.url) } })
  const { traceId, traceparent } = caller()
  const res = await app.inject({ method: 'GET', url: '/v2/users/me', headers: { authorization: `Bearer ${await idp.sign({ sub: 'henry' })}`, traceparent } })
  t.same({ status: res.statusCode, body: res.json() }, { status: 502, body: { error: 'Failed to reach identity provider' } })
  const spans = await traceOf(receiver, traceId, 'GET /v2/users/me')
  const provisioning = spans.find((span) => span.name === 'provision local user')
  t.match(provisioning, { status: { code: 2, message: '' }, attributes: { 'error.type': 'API_IDP_UNREACHABLE' } }, 'the step failed, by its error\'s code')
  t.notOk(provisioning !== undefined && 'user.id' in provisioning.attributes, 'and has no user')
  t.match(spans.find((span) => span.parentSpanId === provisioning?.spanId && span.kind === CLIENT)?.attributes, { 'http.response.status_code': 500, 'error.type': '500' })
  t.match(serverSpanOf(spans), { status: { code: 2, message: '' }, attributes: { 'http.response.status_code': 502, 'error.type': '502' } })
})

t.test('http/json: a cold page reads the database, the same page again only its table versions; routes are named by template', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const app = await build(t, { testAuth: true, config: { tracing: tracingTo(receiver.url, { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'messages-api-test' }) } })
  const created = await app.inject({ method: 'POST', url: '/v2/messages', headers: ALICE, payload: { content: 'Cached pages' } })
  t.equal(created.statusCode, 201)
  const id = (created.json() as { id: number }).id

  const read = async (path: string): Promise<{ res: LightMyRequestResponse, spans: ExportedSpan[] }> => {
    const { traceId, traceparent } = caller()
    const res = await app.inject({ method: 'GET', url: path, headers: { traceparent } })
    return { res, spans: await traceOf(receiver, traceId, `GET ${path.startsWith('/v2/messages/') ? '/v2/messages/{id}' : '/v2/messages'}`) }
  }
  const cold = await read('/v2/messages?limit=5&sort=createdAt')
  const cached = await read('/v2/messages?limit=5&sort=createdAt')
  t.equal(cold.res.statusCode, 200)
  t.equal(cached.res.body, cold.res.body, 'the same page')
  t.ok(receiver.requests.every((request) => request.contentType.startsWith('application/json')), 'http/json as asked')
  t.equal(serverSpanOf(cold.spans)?.resource['service.name'], 'messages-api-test', 'OTEL_SERVICE_NAME')

  t.equal(serverSpanOf(cold.spans)?.attributes['messages_api.cache'], 'miss', 'the cold page: a cache miss on the request\'s span')
  t.equal(serverSpanOf(cached.spans)?.attributes['messages_api.cache'], 'hit', 'the same page again: a hit')
  const versions = (spans: ExportedSpan[]) => statementsOf(spans).filter((span) => / AS versions$/i.test(String(span.attributes['db.query.text'])))
  t.ok(statementsOf(cold.spans).length > versions(cold.spans).length, 'the cold page is read from the database')
  t.equal(versions(cached.spans).length, 1, 'the cached page costs its table versions, one index lookup')
  t.same(statementsOf(cached.spans).filter((span) => !versions(cached.spans).includes(span)), [], 'and no other statement: nothing of the page is read')

  const item = await read(`/v2/messages/${id}`)
  t.match(serverSpanOf(item.spans)?.attributes, { 'http.route': '/v2/messages/{id}', 'url.path': `/v2/messages/${id}`, 'http.response.status_code': 200 })
  t.comment(`GET /v2/messages?limit=5&sort=createdAt, cold:\n${renderTrace(cold.spans, { durations: true })}`)
  t.comment(`the same page again:\n${renderTrace(cached.spans, { durations: true })}`)
})

t.test('no token, message content, e-mail, name, subject or upstream key in any span, event or resource', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const WEATHER_KEY = 'weather-key-5f81c0'
  const upstream = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ name: new URL(req.url ?? '', 'http://x').searchParams.get('q'), main: { temp: 12 } }))
  })
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => upstream.close(() => { resolve() })))
  const weatherApiUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/data/2.5/weather`
  const app = await build(t, { config: { authIssuer: idp.url, apiAudience: AUDIENCE, weatherApiKey: WEATHER_KEY, weatherApiUrl, tracing: tracingTo(receiver.url) } })

  const secret = {
    subject: 'subject-3d9a7e',
    email: 'ada.quietly@example.org',
    name: 'Ada Quietname',
    content: 'content-b41e the launch moves to Thursday',
    messageSubject: 'subject-line-7c2f',
    malformed: 'malformed-91d0'
  }
  const token = await idp.sign({ sub: secret.subject, role: 'Admin', email: secret.email, name: secret.name })
  const auth = { authorization: `Bearer ${token}` }
  const answers = [
    await app.inject({ method: 'POST', url: '/v2/messages', headers: auth, payload: { content: secret.content, subject: secret.messageSubject } }),
    // A body JSON.parse fails on: its error message quotes the body.
    await app.inject({ method: 'POST', url: '/v2/messages', headers: { ...auth, 'content-type': 'application/json' }, payload: `{"content":"${secret.malformed}" oops` }),
    await app.inject({ method: 'GET', url: `/v2/messages/search?q=${encodeURIComponent('launch moves')}`, headers: auth }),
    await app.inject({ method: 'GET', url: '/v2/users/me', headers: auth }),
    await app.inject({ method: 'GET', url: '/v2/hello', headers: auth }),
    await app.inject({ method: 'GET', url: '/v2/weather?city=Oslo', headers: auth }),
    await app.inject({ method: 'GET', url: '/v2/hello', headers: { authorization: `Bearer ${token}x` } })
  ]
  t.same(answers.map((answer) => answer.statusCode), [201, 400, 200, 200, 200, 200, 401])
  t.match(answers[4]?.json(), { message: `Hello, ${secret.email}!` }, 'the e-mail was in the answers')
  await receiver.waitFor('every request\'s server span', (spans) => spans.filter((span) => span.kind === SERVER).length >= answers.length)

  const weather = receiver.spans.find((span) => span.kind === CLIENT && span.attributes['url.path'] === '/data/2.5/weather')
  t.equal(weather?.attributes['url.full'], `${weatherApiUrl}?q=REDACTED&appid=REDACTED&units=REDACTED`, 'the weather call, its query values redacted')
  t.ok(receiver.spans.some((span) => span.name === 'provision local user'), 'the caller was provisioned (userinfo answered the e-mail and name)')
  const malformed = receiver.spans.find((span) => span.kind === SERVER && span.attributes['http.response.status_code'] === 400)
  t.match(malformed?.status, { code: 2, message: '' }, 'a failed request is an error, without the thrown message')

  const exported = JSON.stringify(receiver.spans, (_key, value: unknown) => typeof value === 'bigint' ? String(value) : value)
  const forbidden = { token, bearer: 'Bearer', weatherKey: WEATHER_KEY, ...secret }
  for (const [what, text] of Object.entries(forbidden)) {
    t.notOk(exported.includes(text), `no ${what} in any decoded span`)
    t.notOk(receiver.requests.some((request) => request.body.includes(text)), `no ${what} in any export as sent`)
  }
  t.ok(receiver.requests.length > 0 && receiver.spans.length > answers.length)
})

t.test('a collector that is down, failing or hanging changes nothing for clients, holds at most the queue and warns once', async (t) => {
  const QUEUE = 20
  const BATCH = 5
  const REQUESTS = 200
  for (const state of ['down', 'failing', 'hanging'] as const) {
    await t.test(state, async (t) => {
      const receiver = await startOtlpReceiver(t)
      receiver.mode = state === 'failing' ? 'fail' : 'hang'
      const endpoint = state === 'down' ? `http://127.0.0.1:${await freePort()}` : receiver.url
      const lines: LogLine[] = []
      const app = await build(t, {
        testAuth: true,
        logger: capture(lines),
        config: {
          tracing: tracingTo(endpoint, {
            OTEL_BSP_MAX_QUEUE_SIZE: String(QUEUE),
            OTEL_BSP_MAX_EXPORT_BATCH_SIZE: String(BATCH),
            OTEL_EXPORTER_OTLP_TIMEOUT: '1000'
          })
        }
      })
      if (state === 'hanging') {
        // The collector first holds an export: every request below is answered while it does.
        t.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 200)
        await receiver.waitFor('an export to hold', () => receiver.requests.length > 0)
      }
      const statuses = await Promise.all(Array.from({ length: REQUESTS }, async () => (await app.inject({ method: 'GET', url: '/health' })).statusCode))
      t.same(new Set(statuses), new Set([200]), `all ${REQUESTS} requests answered 200`)
      if (state === 'hanging') t.equal(receiver.spans.length, 0, 'answered while the collector had answered no export')

      const warnings = (): LogLine[] => lines.filter((line) => line.level === 40 && line.msg.startsWith('tracing:'))
      for (let waited = 0; warnings().length === 0; waited += 50) {
        if (waited > 20_000) throw new Error('no warning about the collector')
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      if (state === 'hanging') {
        // The collector answers again: what reaches it is what the queue kept, not what was made.
        receiver.mode = 'ok'
        const marker = await app.inject({ method: 'GET', url: '/v2/movies?limit=1' })
        t.equal(marker.statusCode, 200)
        await receiver.waitFor('the request after the collector came back', (spans) => spans.some((span) => span.name === 'GET /v2/movies'))
        const kept = receiver.spans.filter((span) => span.name === 'GET /health').length
        t.ok(kept <= QUEUE + BATCH, `of ${REQUESTS} spans made while it hung, ${kept} were kept (queue ${QUEUE}, a batch ${BATCH}): the rest were dropped, not held`)
      }
      t.equal(warnings().length, 1, 'one warning (at most one a minute)')
      t.notOk(JSON.stringify(warnings()).includes('collector failure'), 'the warning says what failed, not what the collector answered')
      t.comment(JSON.stringify(warnings()[0]))
    })
  }
})

t.test('a held long-poll and an open stream are one span each, ending with the request and counting deliveries', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const app = await build(t, { testAuth: true, config: { tracing: tracingTo(receiver.url) } })
  const url = await listening(t, app)
  const post = async (content: string): Promise<void> => {
    t.equal((await app.inject({ method: 'POST', url: '/v2/messages', headers: ALICE, payload: { content } })).statusCode, 201)
  }
  await post('before anyone waits')
  // Once every transaction older than that write has ended (in a shared server, another test's), the
  // copy below is complete and current, and its token is caught up: the polls' own reads are the same
  // each run (CONTRACT 12).
  await quiesce(app)

  // A poll that answers at once: what a client's own read of the feed costs.
  const plain = caller()
  const first = await get(changesUrl(url), { headers: { traceparent: plain.traceparent } })
  const next = (first.body as { next: string }).next
  const own = statementsOf(await traceOf(receiver, plain.traceId, 'GET /v2/messages/changes')).length
  t.ok(own >= 1, 'a poll reads the feed')

  const held = caller()
  const poll = pending(get(changesUrl(url, { since: next, wait: '20' }), { headers: { traceparent: held.traceparent } }))
  await heldPolls(app, 1)
  await post('answers the long-poll')
  t.equal((await poll.promise).status, 200)
  const pollSpans = await traceOf(receiver, held.traceId, 'GET /v2/messages/changes')
  t.match(serverSpanOf(pollSpans)?.attributes, { 'messages_api.live': 'long-poll', 'messages_api.live.deliveries': 1, 'http.response.status_code': 200 })
  t.equal(statementsOf(pollSpans).length, own, 'the held poll\'s own read: the watcher\'s reads while it waited are nobody\'s')
  // On PostgreSQL a read that opens a pool connection may first wait for an election (src/db/failover/elector.ts).
  t.same(pollSpans.filter((span) => span.kind !== SERVER && !isStatement(span) && span.name !== PRIMARY_WAIT).map((span) => span.name), [],
    'nothing else under the held poll but a new connection\'s wait for the primary')

  const opened = caller()
  const watchReads = async (): Promise<number> => metricValue(await scrape(app), 'live_watch_queries_total') ?? 0
  const stream = await streams(t)(changesUrl(url, { since: next }), { traceparent: opened.traceparent })
  await stream.event(1)
  const second = caller()
  t.equal((await app.inject({ method: 'POST', url: '/v2/messages', headers: { ...ALICE, traceparent: second.traceparent }, payload: { content: 'a second event' } })).statusCode, 201)
  await stream.event(2)
  const reads = await watchReads()
  for (let waited = 0; (await watchReads()) < reads + 5; waited += 20) {
    if (waited > 20_000) throw new Error('the watcher did not read')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  t.notOk(receiver.spans.some((span) => span.traceId === opened.traceId && span.kind === SERVER), 'the stream\'s span is open while the stream is')
  stream.close()
  const streamSpans = await traceOf(receiver, opened.traceId, 'GET /v2/messages/changes')
  t.match(serverSpanOf(streamSpans)?.attributes, { 'messages_api.live': 'stream', 'messages_api.live.deliveries': 2, 'http.response.status_code': 200 })
  const secondPost = serverSpanOf(await traceOf(receiver, second.traceId, 'POST /v2/messages'))
  t.ok(secondPost !== undefined && statementsOf(streamSpans).every((span) => span.endNs < secondPost.startNs),
    'under the stream, its first read only: not the reads that found the second event, nor the watcher\'s')
  t.equal(streamSpans.filter((span) => span.kind === SERVER).length, 1, 'one span for the stream\'s life, not one per event')
  t.comment(`an event stream, two events, closed by the client:\n${renderTrace(streamSpans, { durations: true })}`)
})

t.test('parentbased_always_off: only requests whose caller samples them are traced', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const app = await build(t, { testAuth: true, config: { tracing: tracingTo(receiver.url, { OTEL_TRACES_SAMPLER: 'parentbased_always_off' }) } })
  const unsampled = caller()
  await app.inject({ method: 'GET', url: '/health' })
  await app.inject({ method: 'GET', url: '/health', headers: { traceparent: unsampled.traceparent.replace(/-01$/, '-00') } })
  const sampled = caller()
  await app.inject({ method: 'GET', url: '/v2/movies?limit=1', headers: { traceparent: sampled.traceparent } })
  const spans = await traceOf(receiver, sampled.traceId, 'GET /v2/movies')
  t.ok(statementsOf(spans).length >= 1, 'the sampled request, with its statements')
  t.same(receiver.spans.filter((span) => span.traceId !== sampled.traceId), [], 'nothing of the others')
})
