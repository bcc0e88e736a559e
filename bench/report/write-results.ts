/** The end of a run: the machine, the writes checked once the embedded service has stopped, the result files, the verdict. */
import { writeFileSync } from 'node:fs'
import { cpus, release, totalmem, type } from 'node:os'
import { join } from 'node:path'
import { lostWrites, type DeferredWrites } from '../checks/answer-checks.js'
import { liveProblems } from '../live/report.js'
import { EMBEDDED_DATA_DIR, RESULTS_DIR } from '../run/locations.js'
import { pgliteOracle, type Oracle } from '../checks/reference-sql.js'
import { renderMarkdown, renderSvg, type BenchReport, type Machine, type RowReport } from './bench-report.js'
import { cleanup } from '../servers/child-servers.js'

export const RSS_LIMIT_MB = 250

/** This machine, and what answers for the database (the oracle's label, or what a target's run says instead). */
export function describeMachine (database: Pick<Oracle, 'label'>): Machine {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown CPU',
    memoryGb: totalmem() / 1024 ** 3,
    node: process.version,
    postgres: database.label,
    os: `${type()} ${release()}`
  }
}

/** The writes the oracle could not see while the service ran, each charged to its row's service result. */
export async function checkDeferred (deferred: DeferredWrites[], reports: RowReport[]): Promise<void> {
  if (deferred.length === 0) return
  // The service stops as on a deploy (SIGTERM, its database closed), then its own directory is read.
  await cleanup()
  for (const check of deferred) {
    const written = await pgliteOracle(EMBEDDED_DATA_DIR)
    try {
      const problems = await lostWrites(written, check.acknowledged, check.added, check.connections)
      const measured = reports.find((r) => `${r.name} (service)` === check.row)?.results.service
      measured?.problems.push(...problems.map((p) => `after the service stopped: ${p}`))
    } finally {
      await written.close()
    }
  }
}

/** Writes bench/results/<name>.{md,json,svg} and prints the table. */
export function writeResults (report: BenchReport, name: string): void {
  const markdown = renderMarkdown(report)
  writeFileSync(join(RESULTS_DIR, `${name}.md`), markdown)
  writeFileSync(join(RESULTS_DIR, `${name}.json`), JSON.stringify(report, null, 2) + '\n')
  writeFileSync(join(RESULTS_DIR, `${name}.svg`), renderSvg(report))
  process.stdout.write('\n' + markdown + `\nWritten to ${join(RESULTS_DIR, `${name}.{md,json,svg}`)}\n`)
}

/** As for the rows, a target is reported, not enforced: wrong answers and RSS over the limit fail the run. */
export function failed (report: BenchReport): boolean {
  const { sync } = report
  const failedRow = report.rows.some((r) => (r.results.service?.problems.length ?? 0) > 0 || (r.results.service?.peakRssMb ?? 0) > (report.rssLimitMb ?? Infinity))
  const failedSync = sync !== undefined && (sync.problems.length > 0 || (sync.initial?.peakRssMb ?? 0) > RSS_LIMIT_MB)
  const failedLive = report.live !== undefined && liveProblems(report.live).length > 0
  return failedRow || failedSync || failedLive
}
