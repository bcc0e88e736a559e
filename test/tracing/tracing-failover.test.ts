import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { testConfig } from '../helpers/build.js'
import { startFailoverCluster } from '../../scripts/postgres/failover-cluster.js'
import { startOtlpReceiver, type ExportedSpan } from '../helpers/otlp-receiver.js'
import { renderTrace } from '../helpers/trace-tree.js'

// CONTRACT 14 and 15: during a failover, a request whose connection waits for the election of a
// writable primary, or finds none, shows it in its trace. On a throwaway primary and standby
// (scripts/postgres/failover-cluster.ts), whichever database the suite runs on.

const DATABASE = 'messages'
const ALICE = { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User', name: 'Alice' }) }
const WAIT = 'wait for database primary'

t.test('the wait for a writable primary is a span of the request that waited', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const cluster = await startFailoverCluster({ synchronous: false })
  t.teardown(() => cluster.stop())
  await cluster.query('a', `create database ${DATABASE}`)
  await cluster.waitStreaming()
  const tracing = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '10' }).tracing
  const app = await buildApp(testConfig({ databaseUrl: cluster.url(DATABASE), tracing }), { logger: false, testAuth: true })
  t.teardown(() => app.close())
  await cluster.waitReplayed()

  /** A POST with a traceparent of its own: its status and the spans of its trace. */
  async function post (content: string): Promise<{ status: number, spans: ExportedSpan[] }> {
    const traceId = randomBytes(16).toString('hex')
    const res = await app.inject({ method: 'POST', url: '/v2/messages', headers: { ...ALICE, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` }, payload: { content } })
    await receiver.waitFor(`the trace of a POST answered ${res.statusCode}`, (spans) => spans.some((span) => span.traceId === traceId && span.kind === 2))
    return { status: res.statusCode, spans: receiver.trace(traceId) }
  }
  t.equal((await post('before the failover')).status, 201)

  cluster.kill('a')
  // A write on a connection the kill cut fails as well (503); the first that opens a new
  // connection asks the elector, which finds no writable primary.
  let gap: { status: number, spans: ExportedSpan[] } | undefined
  for (let tries = 0; gap === undefined; tries++) {
    if (tries === 50) throw new Error('no write waited for an election while there was no primary')
    const answer = await post('in the gap')
    t.equal(answer.status, 503, 'a write in the gap is refused')
    if (answer.spans.some((span) => span.name === WAIT)) gap = answer
    else await sleep(100)
  }
  const waited = gap.spans.find((span) => span.name === WAIT)
  const gapServer = gap.spans.find((span) => span.kind === 2)
  t.match(waited, { kind: 1, status: { code: 2 }, attributes: { 'db.system.name': 'postgresql', 'error.type': 'no_writable_primary' } }, 'the refused write waited for an election, which found no writable primary')
  t.equal(waited?.parentSpanId, gapServer?.spanId, 'a step of the request')
  t.match(gap.spans.find((span) => span.kind === 2)?.attributes, { 'http.response.status_code': 503 })
  t.comment(`a write while no primary answers:\n${renderTrace(gap.spans, { durations: true })}`)

  const beforePromotion = receiver.spans.length
  await cluster.promote('b')
  const promoted = Number(new URL(cluster.serverUrl('b')).port)
  let written: { status: number, spans: ExportedSpan[] } | undefined
  for (const deadline = Date.now() + 20_000; written === undefined; await sleep(100)) {
    if (Date.now() > deadline) throw new Error('no write succeeded after the promotion')
    const answer = await post('after the promotion')
    if (answer.status === 201) written = answer
  }
  // A connection asked for within moments of the periodic election takes its answer without
  // waiting, so the write that succeeds may or may not show a wait.
  const after = receiver.spans.slice(beforePromotion).filter((span) => span.name === WAIT && span.status.code !== 2)
  t.ok(after.every((span) => span.attributes['server.port'] === promoted), `every wait that found a primary since found the promoted one (${after.length})`)
  t.comment(`the first write after the promotion:\n${renderTrace(written.spans, { durations: true })}`)
})
