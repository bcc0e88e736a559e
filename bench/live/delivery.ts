/**
 * A delivery row: N clients held open (long-poll or SSE), writes at a set rate for the row's seconds,
 * then the checks: every client holds every write, in an order the commits allow, and the table holds
 * exactly what was written. Reports deliveries, delays, the service's memory per connection, the
 * database queries spent watching and the CPU of each process.
 */
import { loadavg } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { sampleRss } from '../load/memory-and-health-probes.js'
import { startFleet, type Fleet } from './fleet.js'
import { readLiveMetrics } from './metrics.js'
import type { ExactnessReport, FromClient } from './protocol.js'
import type { DeliveryReport } from './report.js'
import { deliveryName, type DeliverySpec } from './rows.js'
import { catchUp, commitSender, nextMessageId, steadyRssMb, transactions, waitHeld, watchCpu, type LiveSession } from './session.js'
import { startLiveWriter, type WriterSummary } from './writer.js'

// Long enough for 10,000 long-polls to come back for their last answer on a small machine.
export const DRAIN_MS = 30_000
const HOLD_TIMEOUT_MS = 120_000

/** The clients of a row, open and held at a caught-up position, and what the service weighed before. */
export interface OpenClients { fleet: Fleet, baseId: number, rssBeforeMb: number, rssOpenMb: number, problems: string[] }

export async function openClients (session: LiveSession, spec: Pick<DeliverySpec, 'mode' | 'connections'>): Promise<OpenClients> {
  const { service } = session
  const fleet = await startFleet(spec.connections)
  const problems: string[] = []
  try {
    const since = await catchUp(session)
    const baseId = await nextMessageId(service.base)
    const rssBeforeMb = await steadyRssMb(service.process.pid)
    const opened = await fleet.open({ base: service.base, mode: spec.mode, connections: spec.connections, since, baseId })
    if (opened.open < spec.connections) problems.push(`${spec.connections - opened.open} of ${spec.connections} clients did not open; the first: ${opened.failures[0] ?? '?'}`)
    const held = await waitHeld(service.base, opened.open, HOLD_TIMEOUT_MS)
    if (held < opened.open) problems.push(`the service held ${held} of ${opened.open} clients after ${HOLD_TIMEOUT_MS / 1000} s`)
    process.stdout.write(`bench: live: ${opened.open} ${spec.mode} clients open in ${opened.seconds.toFixed(1)} s, ${held} held\n`)
    await sleep(500)
    const rssOpenMb = await steadyRssMb(service.process.pid)
    return { fleet, baseId, rssBeforeMb, rssOpenMb, problems }
  } catch (err) {
    await fleet.stop()
    throw err
  }
}

/** The checks of the table against the writes: ids written that are not there, rows there that nobody wrote. */
export async function tableProblems (session: LiveSession, baseId: number, writes: WriterSummary['writes']): Promise<{ missing: number, extra: number } | undefined> {
  if (!session.oracle.live) return undefined
  const rows = await session.oracle.rows<{ id: string }>('select id from messages where id >= $1', [baseId])
  const inTable = new Set(rows.map((r) => Number(r.id)))
  const written = new Set(writes.map((w) => w.id))
  return { missing: [...written].filter((id) => !inTable.has(id)).length, extra: [...inTable].filter((id) => !written.has(id)).length }
}

/** The problems of the clients' end state. */
export function exactProblems (exact: ExactnessReport, connections: number, writes: number): string[] {
  const problems: string[] = []
  if (exact.complete < connections) problems.push(`${connections - exact.complete} of ${connections} clients lack writes (${exact.missing} missing in all; the first client's: ${exact.missingExample.join(', ')})`)
  if (exact.outOfOrder > 0) problems.push(`${exact.outOfOrder} clients received writes out of commit order; ${exact.outOfOrderExample ?? ''}`)
  if (exact.unexpected > 0) problems.push(`${exact.unexpected} entries were not writes of the row (deletes, or ids nobody wrote)`)
  if (writes === 0) problems.push('the row wrote nothing')
  return problems
}

export function clientProblems (finished: Extract<FromClient, { kind: 'finished' }>): string[] {
  return finished.errorCount > 0 ? [`${finished.errorCount} client errors; the first: ${finished.errors[0] ?? '?'}`] : []
}

export async function runDelivery (session: LiveSession, spec: DeliverySpec): Promise<DeliveryReport> {
  const { service } = session
  const clients = await openClients(session, spec)
  const { fleet, baseId } = clients
  // Stopped however the row ends: a sampler left running would keep the benchmark from exiting.
  const rss = sampleRss(service.process.pid)
  try {
    const metricsBefore = await readLiveMetrics(service.base)
    const xactsBefore = await transactions(session)
    const cpu = watchCpu(session, fleet)
    const began = performance.now()
    const sender = commitSender(fleet)
    const writeStart = performance.timeOrigin + performance.now()
    const writer = startLiveWriter({ base: service.base, tokens: session.apiTokens, bodies: session.bodies, sql: session.sql, authorIds: session.authorIds, rate: spec.rate, onCommit: sender.add })
    await sleep(session.seconds * 1000)
    const written = await writer.stop()
    sender.stop()
    const cpuUse = cpu.stop()
    const metricsAfter = await readLiveMetrics(service.base)
    const watchSeconds = (performance.now() - began) / 1000
    const load = loadavg()[0]!
    const finished = await fleet.finish(written.writes, DRAIN_MS)
    const peakMb = rss.stop()
    // PostgreSQL flushes its statistics about once a second: read after the drain, over the whole span.
    await sleep(1200)
    const xactsAfter = await transactions(session)
    const xactSeconds = (performance.now() - began) / 1000
    const table = await tableProblems(session, baseId, written.writes)
    const { total } = finished
    const receiving = Math.max(0.001, (total.last - writeStart) / 1000)
    const problems = [...clients.problems, ...written.problems.map((p) => `writer: ${p}`), ...exactProblems(finished.exact, spec.connections, written.writes.length), ...clientProblems(finished)]
    if (table !== undefined && (table.missing > 0 || table.extra > 0)) problems.push(`the table lacks ${table.missing} written ids and holds ${table.extra} that nobody wrote`)
    if (Number.isNaN(metricsBefore.watchQueries)) problems.push('GET /metrics has no live_watch_queries_total')
    const report: DeliveryReport = {
      key: spec.key,
      name: deliveryName(spec),
      mode: spec.mode,
      connections: spec.connections,
      rate: spec.rate,
      seconds: written.seconds,
      writes: { api: written.api, sql: written.sql, failed: written.failed, achievedRate: written.writes.length / written.seconds },
      deliveriesPerSecond: total.events / receiving,
      entriesPerSecond: total.entries / receiving,
      delay: total.delay,
      rss: { beforeMb: clients.rssBeforeMb, openMb: clients.rssOpenMb, perConnectionKb: (clients.rssOpenMb - clients.rssBeforeMb) * 1024 / spec.connections, peakMb },
      watch: {
        queriesPerSecond: (metricsAfter.watchQueries - metricsBefore.watchQueries) / watchSeconds,
        answerReadsPerSecond: (metricsAfter.answerReads - metricsBefore.answerReads) / watchSeconds,
        transactionsPerSecond: xactsBefore === undefined || xactsAfter === undefined ? undefined : (xactsAfter - xactsBefore) / xactSeconds
      },
      cpu: cpuUse,
      load,
      exact: finished.exact,
      table,
      reconnects: finished.reconnects,
      problems
    }
    printDelivery(report)
    return report
  } finally {
    rss.stop()
    await fleet.stop()
  }
}

function printDelivery (r: DeliveryReport): void {
  process.stdout.write(`bench: live ${r.name}: ${r.writes.achievedRate.toFixed(1)} writes/s, ${Math.round(r.deliveriesPerSecond)} deliveries/s, ` +
    `delay p50 ${r.delay.p50.toFixed(1)} p99 ${r.delay.p99.toFixed(1)} max ${r.delay.max.toFixed(1)} ms, ${r.rss.perConnectionKb.toFixed(1)} KB/connection, ` +
    `${r.watch.queriesPerSecond.toFixed(1)} watch + ${r.watch.answerReadsPerSecond.toFixed(1)} answer reads/s, ` +
    `${r.exact.complete}/${r.connections} exact${r.problems.length > 0 ? ` FAILED: ${r.problems[0]!}` : ''}\n`)
}
