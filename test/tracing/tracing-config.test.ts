import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { loadConfig } from '../../src/config.js'
import { summarize } from '../../src/db/statement-spans.js'
import { redactQuery } from '../../src/tracing/outbound.js'
import { routeTemplate } from '../../src/tracing/server-spans.js'
import { oncePerInterval } from '../../src/tracing/warnings.js'
import { build } from '../helpers/build.js'

// CONTRACT 15's configuration (the standard OTEL_* variables, read by src/config.ts) and tracing
// off, which this file checks in a process where the SDK never starts.

const ENDPOINT = 'http://collector.internal:4318'

t.test('tracing is off unless an OTLP endpoint is set, and OTEL_SDK_DISABLED=true turns it off', async (t) => {
  t.equal(loadConfig({}).tracing, undefined, 'off by default')
  t.equal(loadConfig({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }).tracing, undefined, 'other OTEL_* variables alone do not turn it on')
  t.same(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT }).tracing, {
    serviceName: 'messages-api',
    resourceAttributes: {},
    endpoint: `${ENDPOINT}/v1/traces`,
    protocol: 'http/protobuf',
    headers: {},
    timeoutMs: 10_000,
    sampler: 'parentbased_always_on',
    samplerRatio: 1,
    batch: { scheduleDelayMs: 5000, exportTimeoutMs: 30000, maxQueueSize: 2048, maxExportBatchSize: 512 }
  }, 'the specification\'s defaults, and OTEL_SERVICE_NAME\'s of the contract')
  t.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: `${ENDPOINT}/` }).tracing?.endpoint, `${ENDPOINT}/v1/traces`, 'one slash')
  t.equal(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${ENDPOINT}/custom` }).tracing?.endpoint, `${ENDPOINT}/custom`, 'the traces endpoint as it is')
  t.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/v1/t' }).tracing?.endpoint,
    'https://traces.example/v1/t', 'the traces endpoint wins')
  for (const disabled of ['true', 'TRUE', 'True']) {
    t.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: disabled }).tracing, undefined, `OTEL_SDK_DISABLED=${disabled}`)
  }
  t.not(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: 'false' }).tracing, undefined, 'OTEL_SDK_DISABLED=false')
})

t.test('the OTEL_* variables', async (t) => {
  const tracing = loadConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=staging, service.name=from-resource,team=a%2Cb',
    OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=general,x-tenant=one',
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-api-key=traces%20only',
    OTEL_EXPORTER_OTLP_TIMEOUT: '3000',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0.1',
    OTEL_BSP_SCHEDULE_DELAY: '200',
    OTEL_BSP_EXPORT_TIMEOUT: '5000',
    OTEL_BSP_MAX_QUEUE_SIZE: '100',
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '100'
  }).tracing
  t.same(tracing, {
    serviceName: 'from-resource',
    resourceAttributes: { 'deployment.environment.name': 'staging', team: 'a,b' },
    endpoint: `${ENDPOINT}/v1/traces`,
    protocol: 'http/json',
    headers: { 'x-api-key': 'traces only', 'x-tenant': 'one' },
    timeoutMs: 3000,
    sampler: 'parentbased_traceidratio',
    samplerRatio: 0.1,
    batch: { scheduleDelayMs: 200, exportTimeoutMs: 5000, maxQueueSize: 100, maxExportBatchSize: 100 }
  })
  const named = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SERVICE_NAME: 'api-eu', OTEL_RESOURCE_ATTRIBUTES: 'service.name=ignored' }).tracing
  t.equal(named?.serviceName, 'api-eu', 'OTEL_SERVICE_NAME wins over service.name in OTEL_RESOURCE_ATTRIBUTES')
  t.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }).tracing?.protocol,
    'http/protobuf', 'the traces protocol wins')
  t.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_EXPORTER_OTLP_TIMEOUT: '3000', OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '500' }).tracing?.timeoutMs,
    500, 'and the traces timeout')
})

t.test('an invalid OTEL_* value stops start-up with one line naming it', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, 'Invalid OTEL_EXPORTER_OTLP_ENDPOINT: must be an http(s) URL (got "collector:4318")'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'Invalid OTEL_EXPORTER_OTLP_PROTOCOL: must be http/protobuf or http/json (grpc is not supported) (got "grpc")'],
    [{ OTEL_TRACES_SAMPLER: 'jaeger_remote' }, 'Invalid OTEL_TRACES_SAMPLER: must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio (got "jaeger_remote")'],
    [{ OTEL_TRACES_SAMPLER_ARG: '1.5' }, 'Invalid OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1 (the sampling ratio) (got "1.5")'],
    [{ OTEL_TRACES_SAMPLER_ARG: 'half' }, 'Invalid OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1 (the sampling ratio) (got "half")'],
    [{ OTEL_SDK_DISABLED: 'yes' }, 'Invalid OTEL_SDK_DISABLED: must be true or false (got "yes")'],
    [{ OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key' }, 'Invalid OTEL_EXPORTER_OTLP_HEADERS: must be a comma-separated list of key=value pairs (values percent-encoded) (got "x-api-key")'],
    [{ OTEL_RESOURCE_ATTRIBUTES: 'a=%E0%A4%A' }, 'Invalid OTEL_RESOURCE_ATTRIBUTES: must be a comma-separated list of key=value pairs (values percent-encoded) (got "a=%E0%A4%A")'],
    [{ OTEL_BSP_MAX_QUEUE_SIZE: '0' }, 'Invalid OTEL_BSP_MAX_QUEUE_SIZE: must be a positive integer (spans) (got "0")'],
    [{ OTEL_BSP_MAX_QUEUE_SIZE: '10', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '20' }, 'Invalid OTEL_BSP_MAX_EXPORT_BATCH_SIZE: must be a positive integer (spans), at most OTEL_BSP_MAX_QUEUE_SIZE (got "20")'],
    [{ OTEL_EXPORTER_OTLP_TIMEOUT: '2.5' }, 'Invalid OTEL_EXPORTER_OTLP_TIMEOUT: must be a positive integer (milliseconds) (got "2.5")']
  ]
  for (const [env, message] of cases) {
    t.throws(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, ...env }), { name: 'ConfigError', message }, Object.keys(env).join(', '))
  }
})

t.test('off, tracing registers nothing: no @fastify/otel, no outbound hook, no log mixin', async (t) => {
  const seen: IncomingHttpHeaders[] = []
  const upstream = createServer((req, res) => {
    seen.push(req.headers)
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"main":{"temp":1}}')
  })
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => upstream.close(() => { resolve() })))
  const lines: Array<Record<string, unknown>> = []
  const app = await build(t, {
    testAuth: true,
    logger: { level: 'info', stream: { write: (line: string) => { lines.push(JSON.parse(line) as Record<string, unknown>) } } },
    config: { weatherApiKey: 'k', weatherApiUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/weather` }
  })
  const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
  const res = await app.inject({ method: 'GET', url: '/v2/movies?limit=1', headers: { traceparent } })
  t.equal(res.statusCode, 200)
  const user = { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User' }), traceparent }
  t.equal((await app.inject({ method: 'GET', url: '/v2/weather?city=Oslo', headers: user })).statusCode, 200)
  t.notOk(app.hasPlugin('@fastify/otel'), 'no server instrumentation')
  t.notOk(app.hasPlugin('tracing'), 'no tracing plugin')
  t.same(seen.map((headers) => headers.traceparent), [undefined], 'an outbound call carries no traceparent')
  const line = lines.find((entry) => entry.msg === 'request')
  t.ok(line !== undefined && !('trace_id' in line) && !('span_id' in line), 'log lines carry no trace ids')
})

t.test('the pieces', async (t) => {
  t.equal(routeTemplate('/v2/messages/:id'), '/v2/messages/{id}')
  t.equal(routeTemplate('/v2/users/:id(^\\d+)/x'), '/v2/users/{id}/x')
  t.equal(routeTemplate('/v2/messages'), '/v2/messages')
  t.equal(redactQuery('?q=Oslo&appid=secret&units=metric'), '?q=REDACTED&appid=REDACTED&units=REDACTED')
  t.equal(redactQuery(''), '')
  t.same(summarize('WITH input AS (SELECT 1), inserted AS (INSERT INTO messages (content) SELECT * FROM input RETURNING *) SELECT m.id FROM inserted m'),
    { operation: 'INSERT', name: 'INSERT messages' }, 'a write in a common table expression names the statement')
  t.same(summarize('select "id" from "users" where "users"."subject_id" = $1'), { operation: 'SELECT', name: 'SELECT users' })
  t.same(summarize('update "users" set "name" = $1 where id = $2'), { operation: 'UPDATE', name: 'UPDATE users' })
  t.same(summarize('delete from messages where id = $1'), { operation: 'DELETE', name: 'DELETE messages' })
  t.same(summarize('/* a */ SELECT (SELECT 1) AS versions'), { operation: 'SELECT', name: 'SELECT' }, 'no single table: the operation alone')
  t.same(summarize("SELECT 'FROM x' FROM (SELECT 1) t -- FROM y"), { operation: 'SELECT', name: 'SELECT' }, 'strings, subqueries and comments are not tables')

  const logged: Array<{ obj: object, msg: string }> = []
  let now = 0
  const warn = oncePerInterval({ warn: (obj, msg) => { logged.push({ obj, msg }) } }, 60_000, () => now)
  warn('exporting spans failed', new Error('connect ECONNREFUSED'))
  for (now = 1; now < 60_000; now += 1000) warn('exporting spans failed', new Error('again'))
  t.equal(logged.length, 1, 'one warning in the first minute')
  now = 60_000
  warn('exporting spans failed', new Error('still'))
  t.same(logged, [
    { obj: { err: { message: 'connect ECONNREFUSED' } }, msg: 'tracing: exporting spans failed' },
    { obj: { err: { message: 'still' }, suppressed: 60 }, msg: 'tracing: exporting spans failed' }
  ], 'the next one a minute later, counting those it stood for')
})
