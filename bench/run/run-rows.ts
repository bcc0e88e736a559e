/** The run: every row against each of its servers in turn, with the delta sync section in its place. */
import { setTimeout as sleep } from 'node:timers/promises'
import { runCannon } from '../load/autocannon.js'
import type { Tokens } from './caller-tokens.js'
import { measure, type RunSettings } from './measure-row.js'
import { platformaticPath } from '../servers/platformatic-peer.js'
import { TARGETS, type RowReport, type SyncReport } from '../report/bench-report.js'
import type { Row } from '../rows/row.js'
import { errorLines, logSize, logTail } from '../servers/server-logs.js'
import { running, type MeasuredServers } from '../servers/child-servers.js'
import { BenchError } from './bench-error.js'
import { settle } from '../database/wait-quiet.js'
import { measureSync, printSync } from '../delta-sync/section.js'

/** Unreported warm-up, so the first row does not pay for JIT compilation and pool connections. */
export async function warmUp (servers: MeasuredServers): Promise<void> {
  for (const child of Object.values(servers)) {
    const page = child.name === 'platformatic' ? platformaticPath('/v2/messages?limit=25') : '/v2/messages?limit=25'
    await runCannon({ url: child.base, connections: 10, duration: 1, maxOverallRequests: 20_000, timeout: 10, requests: [{ method: 'GET', path: child.health }, { method: 'GET', path: page }] })
  }
}

function printRow (row: RowReport): void {
  const parts = TARGETS.flatMap((t) => {
    const m = row.results[t]
    return m === undefined ? [] : [`${t} ${Math.round(m.rps)} req/s p99 ${m.p99} ms${m.problems.length > 0 ? ' FAILED' : ''}`]
  })
  process.stdout.write(`bench: ${row.name}: ${parts.join(', ')}\n`)
}

/**
 * The error lines a server wrote since `from` (answers that came after a row stopped listening), as a
 * problem. A server the benchmark did not start (--target) has no log here.
 */
function loggedProblems (log: string | undefined, from: number, target: string): string[] {
  if (log === undefined) return []
  const logged = errorLines(log, from)
  return logged.length === 0 ? [] : [`${logged.length} error or load-shedding lines in the ${target}'s log during the row; the first: ${logged[0]!.slice(0, 300)}`]
}

/** A row of several loads in one window (Row.together) on each of its servers: a report for each load. */
async function measureTogether (row: Row, together: NonNullable<Row['together']>, servers: MeasuredServers, settings: RunSettings): Promise<RowReport[]> {
  const reports = new Map<string, RowReport>()
  for (const target of row.targets) {
    const child = servers[target]!
    const logFrom = child.log === undefined ? 0 : logSize(child.log)
    const parts = await together(child, { seconds: settings.duration, maxRequests: settings.maxRequests })
    if (!running(child)) throw new BenchError(`the ${child.name} server exited during "${row.name}" (${child.log}):\n${logTail(child.log)}`)
    if (settings.oracle !== undefined) await settle(settings.oracle)
    parts[0]?.measurement.problems.push(...loggedProblems(child.log, logFrom, target))
    for (const part of parts) {
      const report = reports.get(part.key) ?? { key: part.key, name: part.name, results: {} }
      report.results[target] = part.measurement
      reports.set(part.key, report)
    }
    await sleep(300)
  }
  return [...reports.values()]
}

/** One row on each of its servers, after its reference row measured again on the service. */
async function measureRow (row: Row, rows: Row[], servers: MeasuredServers, settings: RunSettings): Promise<RowReport[]> {
  if (row.together !== undefined) return await measureTogether(row, row.together, servers, settings)
  const { oracle } = settings
  const report: RowReport = { key: row.key, name: row.name, results: {}, reference: row.reference }
  // The machine's speed drifts over a run (the ceiling's /health differed 1.9× between two runs of
  // one hour): a row compared with another is compared with that row measured again just before it.
  const against = row.reference === undefined ? undefined : rows.find((r) => r.key === row.reference!.key)
  if (report.reference !== undefined && against !== undefined) {
    report.reference = { ...report.reference, measured: await measure(against, servers.service, settings) }
    if (oracle !== undefined) await settle(oracle)
    await sleep(300)
  }
  for (const target of row.targets) {
    const child = servers[target]!
    const logFrom = child.log === undefined ? 0 : logSize(child.log)
    const measured = report.results[target] = await measure(row, child, settings)
    if (oracle !== undefined) await settle(oracle)
    // Answers that come after the row has stopped listening (a statement timeout, 10 s on) are
    // seen only in the server's log.
    measured.problems.push(...loggedProblems(child.log, logFrom, target))
    await sleep(300)
  }
  return [report]
}

export async function runRows (rows: Row[], servers: MeasuredServers, settings: RunSettings, tokens: Tokens, withSync: boolean): Promise<{ reports: RowReport[], sync?: SyncReport }> {
  const { oracle } = settings
  const reports: RowReport[] = []
  // The delta sync section comes last, before only the poll row: a full copy leaves the service larger
  // (docs/journal/2026-11-24-reference-run-1m.md), which must not be charged to the rows before it; its catch-up adds messages,
  // which the page rows' expectations would not know of.
  const pollRow = rows.findIndex((row) => row.key === 'sync-poll')
  const syncAt = !withSync || oracle === undefined ? -1 : pollRow === -1 ? rows.length : pollRow
  let sync: SyncReport | undefined
  for (const [index, row] of [...rows, undefined].entries()) {
    if (index === syncAt && oracle !== undefined) {
      sync = await measureSync(servers.service, oracle, tokens)
      printSync(sync)
      await settle(oracle)
      await sleep(300)
    }
    if (row === undefined) break
    for (const report of await measureRow(row, rows, servers, settings)) {
      printRow(report)
      reports.push(report)
    }
  }
  return { reports, sync }
}
