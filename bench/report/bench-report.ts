/** Renders benchmark results: the terminal/Markdown table and the SVG chart. Pure functions, no I/O. */
import type { SeekFloor } from '../database/seek-floor.js'
import { anchorReadLines, type AnchorReads } from './anchor-reads.js'
import type { BulkInsertCost } from '../database/cpu-per-write.js'
import type { GroupSummary } from '../database/write-groups.js'
import { liveLines, liveProblems, type LiveReport } from '../live/report.js'

export type Target = 'service' | 'baseline' | 'ceiling' | 'platformatic'
export const TARGETS: readonly Target[] = ['service', 'baseline', 'ceiling', 'platformatic']
/** What `npm run bench` measures unless `--targets` says otherwise; the Platformatic peer is installed and measured only when asked. */
export const DEFAULT_TARGETS: readonly Target[] = ['service', 'baseline', 'ceiling']

export interface Measurement {
  requests: number
  rps: number
  p50: number
  p99: number
  /** Answers that are neither 2xx nor shed. */
  non2xx: number
  /**
   * Answers 503 with Retry-After: the service's admission control turning a request away at once (CONTRACT
   * 16, and load shedding, CONTRACT 11). Counted apart, not as failures; `rps` counts the answers served.
   */
  shed?: number
  errors: number
  /** Peak resident set size of the server process during the row, in MB. */
  peakRssMb: number
  /** GET /health probed one at a time during the row: latencies in ms, and probes not answered 200. */
  health?: { count: number, failed: number, p99: number, max: number }
  /** Write rows: the database server's CPU per message the row added, µs (server on this machine only). */
  databaseUsPerWrite?: number
  /** Write rows on the service: how its creates were grouped into statements (bench/database/write-groups.ts). */
  groups?: GroupSummary
  problems: string[]
}

export interface RowReport {
  key: string
  name: string
  results: Partial<Record<Target, Measurement>>
  /** On a target (--target): why the row did not run there (ROW_NEEDS in bench/rows/index.ts). */
  skipped?: string
  /** A row measured against another row of the same run: the service's ratio must reach `target`. */
  /** The row this one is compared with, its ratio's target, and that row measured again just before this one. */
  reference?: { key: string, target: number, measured?: Measurement }
}

export interface Machine {
  cpus: number
  cpuModel: string
  memoryGb: number
  node: string
  postgres: string
  os: string
}

/** Delta sync (CONTRACT 12): one client following GET /v2/messages/changes, call after call, on the service. */
export interface SyncReport {
  /** The full initial sync: from no `since` until an answer says hasMore=false. */
  initial?: {
    limit: number
    /** Entries received (every one an upsert on a database nobody writes to meanwhile). */
    messages: number
    calls: number
    seconds: number
    messagesPerSecond: number
    /** Messages per second of every walk, in order; the fields above are the median walk's. */
    walks: number[]
    /** Peak resident set size of the service during the walks, in MB. */
    peakRssMb: number
    /** The messages per second it must reach. */
    target: number
  }
  /** The API writes made before the catch-up, untimed there. */
  writes?: { count: number, seconds: number }
  /** Catching up after the writes, from one caught-up token, for each limit. */
  catchUp: Array<{
    limit: number
    entries: number
    calls: number
    /** The first walk from the token, as a client sees it. */
    firstMs: number
    /** The median of `runs` walks from the same token. */
    medianMs: number
    runs: number
    /** Created ids that did not come as an upsert by the answer that said hasMore=false (first walk). */
    missing: number
  }>
  problems: string[]
}

export interface BenchReport {
  date: string
  machine: Machine
  messages: number
  /** The messages the run asked the table to hold (--messages); `messages` adds what POST wrote. */
  size?: number
  /** The seed this run made, when the table held fewer messages than asked. */
  seed?: { messages: number, seconds: number }
  /** The database's size on disk at the end of the run. */
  databaseBytes?: number
  durationSeconds: number
  connections: number
  /**
   * The service's memory bound. None on the embedded database, whose pages and buffers live in the
   * service's own process: there its RSS is the database's too, and is reported only.
   */
  rssLimitMb: number | undefined
  rows: RowReport[]
  sync?: SyncReport
  /** The live delivery section (bench/live/). */
  live?: LiveReport
  /** The database's CPU per row of a large INSERT ... SELECT, the reference for the write rows' databaseUsPerWrite. */
  bulkInsert?: BulkInsertCost
  /** The database's own prepared keyset seek of a page (pgbench), the floor the cold rows are read against; or why it was not measured. */
  seekFloor?: SeekFloor | string
  /** The service's reads of anchors over the run, from its /metrics. */
  anchorReads?: AnchorReads[]
  /** A run against a deployment the benchmark did not start (--target): where, with which tokens, and whether it wrote. */
  target?: { url: string, tokens: 'file' | 'idp' | 'none', writes: boolean }
}

export const failed = (m: Measurement | undefined): boolean => m !== undefined && m.problems.length > 0

export function ratio (a: Measurement | undefined, b: Measurement | undefined): string {
  if (a === undefined || b === undefined || b.rps <= 0) return '—'
  const r = a.rps / b.rps
  return `${r >= 10 ? r.toFixed(0) : r.toFixed(2)}×`
}

export const int = (n: number): string => Math.round(n).toLocaleString('en-US')
const ms = (n: number): string => n.toFixed(n < 10 ? 2 : 1)

function cells (m: Measurement | undefined): string[] {
  if (m === undefined) return ['—', '—', '—']
  return [int(m.rps) + (failed(m) ? ' FAILED' : ''), ms(m.p50), ms(m.p99)]
}

export function machineLine (m: Machine): string {
  return `${m.cpus} × ${m.cpuModel}, ${m.memoryGb.toFixed(1)} GB memory, ${m.os}, Node ${m.node}, ${m.postgres}`
}

/** The targets a report has figures for: the default three always (their columns are always printed), the peer when it ran; a target's run, the service alone. */
function reported (report: BenchReport): Target[] {
  if (report.target !== undefined) return ['service']
  return TARGETS.filter((t) => DEFAULT_TARGETS.includes(t) || report.rows.some((row) => row.results[t] !== undefined))
}

/** A status with the row's shed answers, when it had any. */
function withShed (status: string, m: Measurement | undefined): string {
  return (m?.shed ?? 0) > 0 ? `${status} (${int(m!.shed!)} shed)` : status
}

/** The note under a table with shed answers: what they are, and whether they failed their rows. */
function shedLines (report: BenchReport): string[] {
  const shed = report.rows.reduce((n, row) => n + TARGETS.reduce((k, t) => k + (row.results[t]?.shed ?? 0), 0), 0)
  if (shed === 0) return []
  return ['', `Shed: ${int(shed)} answers 503 with Retry-After, the service's admission control turning requests away at once ` +
    '(expensive reads beyond what it runs at once and a short wait, CONTRACT 16; load shedding, CONTRACT 11). req/s counts the answers served. ' +
    (report.target !== undefined
      ? 'On a target they are counted apart, not as failures.'
      : 'On the benchmark\'s own servers, whose clients are spread so that none should be shed, they fail their rows, as every non-2xx answer does.')]
}

const TOKEN_SOURCES = { file: 'from --token-file', idp: 'minted by the deployment\'s identity provider (--idp)', none: 'none (the rows that call as a user are skipped)' }

/** A target's table: the service alone, the shed answers in a column, the skipped rows and why. */
function targetTable (report: BenchReport, target: NonNullable<BenchReport['target']>): string[] {
  const m = report.machine
  const lines = [
    `# Benchmark of ${target.url}, ${report.date}`,
    '',
    `Target: ${target.url}, a deployment the benchmark did not start. Load generator: ${m.cpus} × ${m.cpuModel}, ${m.memoryGb.toFixed(1)} GB memory, ${m.os}, Node ${m.node}.`,
    `${int(report.messages)} messages as the target states them, ${report.connections} connections, ${report.durationSeconds} s per row; ` +
      `tokens ${TOKEN_SOURCES[target.tokens]}; writes ${target.writes ? 'allowed (--allow-writes)' : 'none made (no --allow-writes)'}.`,
    'Answers are checked for their shape (page and limit as asked, a total and page count that agree, full pages, ids in order, ' +
      'filters and search terms in every item), not against the database, which the benchmark does not read on a target. ' +
      'Not measured on a target: the naive baseline, the ceiling and the Platformatic peer, which run only beside a database of the benchmark\'s own.',
    '',
    '| Row | req/s | p50 ms | p99 ms | Non-2xx / errors | Shed (503 + Retry-After) | /health probe p99 ms | Status |',
    '|---|---:|---:|---:|---:|---:|---:|---|'
  ]
  for (const row of report.rows) {
    const service = row.results.service
    if (row.skipped !== undefined || service === undefined) {
      lines.push(`| ${row.name} | — | — | — | — | — | — | skipped: ${row.skipped ?? 'not measured'} |`)
      continue
    }
    const [s, s50, s99] = cells(service)
    lines.push(`| ${row.name} | ${s} | ${s50} | ${s99} | ${service.non2xx} / ${service.errors} | ${int(service.shed ?? 0)} | ` +
      `${service.health === undefined ? '—' : ms(service.health.p99)} | ${failed(service) ? 'FAILED' : 'ok'} |`)
  }
  return lines
}

/** The Markdown report: one line per row, service beside baseline and ceiling (and the Platformatic peer when it ran), then failures. */
export function renderMarkdown (report: BenchReport): string {
  const peer = reported(report).includes('platformatic')
  if (report.target !== undefined) return renderRest(report, targetTable(report, report.target))
  const lines = [
    `# Benchmark, ${report.date}`,
    '',
    `Machine: ${machineLine(report.machine)}.`,
    `${int(report.messages)} messages, ${report.connections} connections, ${report.durationSeconds} s per row and server; ` +
      'server processes and load generator on the same machine.',
    '',
    `| Row | Service req/s | p50 ms | p99 ms | Baseline req/s | p50 ms | p99 ms | Ceiling req/s | p99 ms | ${peer ? 'Platformatic req/s | p50 ms | p99 ms | ' : ''}` +
      `Service ÷ baseline | Service ÷ ceiling | ${peer ? 'Service ÷ platformatic | ' : ''}Non-2xx / errors (service) | /health probe p99 ms (service) | Peak RSS MB (service) | Status |`,
    `|---|---:|---:|---:|---:|---:|---:|---:|---:|${peer ? '---:|---:|---:|' : ''}---:|---:|${peer ? '---:|' : ''}---:|---:|---:|---|`
  ]
  // The live rows alone (--live): no row of the table was run.
  if (report.rows.length === 0 && report.live !== undefined) lines.splice(lines.length - 3, 3)
  for (const row of report.rows) {
    const { service, baseline, ceiling, platformatic } = row.results
    // The row is the service's: a reference that cannot answer in time (the baseline's deep pages) is
    // reported beside it, not as the service failing.
    const status = failed(service)
      ? 'FAILED'
      : service !== undefined && report.rssLimitMb !== undefined && service.peakRssMb > report.rssLimitMb
        ? `RSS over ${report.rssLimitMb} MB`
        : TARGETS.some((t) => failed(row.results[t])) ? 'ok (a reference failed)' : 'ok'
    const [s, s50, s99] = cells(service)
    const [b, b50, b99] = cells(baseline)
    const [c, , c99] = cells(ceiling)
    const p = peer ? `${cells(platformatic).join(' | ')} | ` : ''
    const pRatio = peer ? `${ratio(service, platformatic)} | ` : ''
    lines.push(`| ${row.name} | ${s} | ${s50} | ${s99} | ${b} | ${b50} | ${b99} | ${c} | ${c99} | ${p}${ratio(service, baseline)} | ${ratio(service, ceiling)} | ${pRatio}` +
      `${service === undefined ? '—' : `${service.non2xx} / ${service.errors}`} | ${service?.health === undefined ? '—' : ms(service.health.p99)} | ` +
      `${service === undefined ? '—' : service.peakRssMb.toFixed(0)} | ${withShed(status, service)} |`)
  }
  return renderRest(report, lines)
}

/** What follows the table: the shed answers, the reference rows, the write costs, the probes, the sections, the failures. */
function renderRest (report: BenchReport, lines: string[]): string {
  lines.push(...shedLines(report))
  const referenced = report.rows.filter((row) => row.reference !== undefined && row.skipped === undefined)
  if (referenced.length > 0) {
    lines.push('', 'Rows measured against another row of this run (service), that row measured again just before each:', '',
      '| Row | Service req/s | p99 ms | Reference row | Reference req/s | Ratio | Target | Met |', '|---|---:|---:|---|---:|---:|---:|---|')
    for (const row of referenced) {
      const against = report.rows.find((r) => r.key === row.reference!.key)
      const m = row.results.service
      const ref = row.reference!.measured ?? against?.results.service
      const value = m !== undefined && ref !== undefined && ref.rps > 0 ? m.rps / ref.rps : undefined
      lines.push(`| ${row.name} | ${m === undefined ? '—' : int(m.rps)} | ${m === undefined ? '—' : ms(m.p99)} | ${against?.name ?? row.reference!.key} | ` +
        `${ref === undefined ? '—' : int(ref.rps)} | ${ratio(m, ref)} | ≥ ${row.reference!.target}× | ${value === undefined ? '—' : failed(m) ? 'no (the row failed)' : value >= row.reference!.target ? 'yes' : 'no'} |`)
    }
  }
  lines.push(...writeCostLines(report))
  const probed = report.rows.flatMap((row) => row.results.service?.health === undefined ? [] : [row.results.service.health])
  if (probed.length > 0) {
    const worst = Math.max(...probed.map((h) => h.p99))
    const failures = probed.reduce((n, h) => n + h.failed, 0)
    lines.push('', `GET /health, probed one request at a time every 50 ms through every row: p99 at most ${ms(worst)} ms in a row ` +
      `(the longest probe ${ms(Math.max(...probed.map((h) => h.max)))} ms), ${int(probed.reduce((n, h) => n + h.count, 0))} probes, ${failures} not answered 200.`)
  }
  if (report.rssLimitMb === undefined && report.target === undefined) lines.push('', 'Peak RSS on the embedded database includes the database itself (its thread, buffers and WebAssembly memory); no bound is applied.')
  lines.push(...seekFloorLines(report))
  lines.push(...anchorReadLines(report.anchorReads))
  if (report.sync !== undefined) lines.push('', ...syncLines(report.sync, report.rssLimitMb ?? Infinity))
  if (report.live !== undefined) lines.push('', ...liveLines(report.live))
  const failures = report.rows.flatMap((row) => TARGETS.flatMap((t) => (row.results[t]?.problems ?? []).map((p) => `- ${row.name} (${t}): ${p}`)))
  failures.push(...(report.sync?.problems ?? []).map((p) => `- Delta sync: ${p}`))
  failures.push(...(report.live === undefined ? [] : liveProblems(report.live)).map((p) => `- Live: ${p}`))
  if (failures.length > 0) lines.push('', 'Failures:', '', ...failures)
  return lines.join('\n') + '\n'
}

/** The cold rows against the database's own keyset seek of a page, read in the same run. */
function seekFloorLines (report: BenchReport): string[] {
  const floor = report.seekFloor
  if (floor === undefined) return []
  if (typeof floor === 'string') return ['', `Database floor (PostgreSQL's prepared keyset seek of a page): not measured, ${floor}.`]
  const cold = report.rows.filter((row) => row.key.startsWith('random-') && row.results.service !== undefined)
  const lines = ['', 'Database floor: PostgreSQL\'s own prepared keyset seek of a page (25 rows from a random id, joined to their authors; ' +
    `pgbench -M prepared -j 2 -c ${floor.clients}, ${floor.seconds} s, maxid ${int(floor.maxId)}): ${int(floor.tps)} a second.`, '',
  '| Row | Service req/s | ÷ the seek | Target | Met |', '|---|---:|---:|---:|---|']
  for (const row of cold) {
    const rps = row.results.service!.rps
    const target = row.key === 'random-search' ? undefined : 0.33
    lines.push(`| ${row.name} | ${int(rps)} | ${(rps / floor.tps).toFixed(3)}× | ${target === undefined ? '—' : `≥ ${target}×`} | ${target === undefined ? '—' : rps / floor.tps >= target ? 'yes' : 'no'} |`)
  }
  return lines
}

/** The database server's CPU per created message in each write row, against its cost per row in one large insert. */
function writeCostLines (report: BenchReport): string[] {
  const bulk = report.bulkInsert
  const measured = report.rows.flatMap((row) => TARGETS.flatMap((t) => {
    const us = row.results[t]?.databaseUsPerWrite
    return us === undefined ? [] : [{ row: row.name, target: t, us, groups: row.results[t]?.groups }]
  }))
  if (measured.length === 0) return []
  const lines = ['', 'PostgreSQL CPU per created message (the server\'s whole process tree, from /proc), against one ' +
    `${bulk === undefined ? 'large insert (not measured)' : `${int(bulk.rows)}-row INSERT … SELECT on the same table: ${bulk.usPerRow.toFixed(1)} µs per row (median of ${bulk.repeats}: ${bulk.each.map((us) => us.toFixed(1)).join(', ')})`}:`,
  '', '| Row | Server | µs per created message | ÷ INSERT … SELECT per row | Groups | Creates per group | Oldest create\'s wait, ms | Statement, ms |', '|---|---|---:|---:|---:|---:|---:|---:|']
  for (const m of measured) {
    const g = m.groups === undefined ? ['—', '—', '—', '—'] : [int(m.groups.groups), m.groups.meanSize.toFixed(1), ms(m.groups.meanWaitMs), ms(m.groups.meanStatementMs)]
    lines.push(`| ${m.row} | ${m.target} | ${m.us.toFixed(1)} | ${bulk === undefined ? '—' : `${(m.us / bulk.usPerRow).toFixed(2)}×`} | ${g.join(' | ')} |`)
  }
  return lines
}

const duration = (seconds: number): string => seconds >= 1 ? `${seconds.toFixed(2)} s` : `${ms(seconds * 1000)} ms`

/** The delta sync table: a sequential client, so calls and time rather than requests per second. */
function syncLines (sync: SyncReport, rssLimitMb: number): string[] {
  const lines = ['Delta sync, service only: one client follows GET /v2/messages/changes call after call (undici `request`, `JSON.parse` of every answer):', '',
    '| Measurement | Entries | Calls | Time | Entries/s | Peak RSS MB (service) | Target | Met |', '|---|---:|---:|---:|---:|---:|---:|---|']
  const { initial } = sync
  if (initial !== undefined) {
    const rss = initial.peakRssMb.toFixed(0) + (initial.peakRssMb > rssLimitMb ? ` (over ${rssLimitMb})` : '')
    lines.push(`| Full initial sync, limit ${initial.limit} (median of ${initial.walks.length} walks: ${initial.walks.map(int).join(', ')}/s) | ${int(initial.messages)} | ${int(initial.calls)} | ${duration(initial.seconds)} | ` +
      `${int(initial.messagesPerSecond)} | ${rss} | ≥ ${int(initial.target)} messages/s | ${initial.messagesPerSecond >= initial.target ? 'yes' : 'no'} |`)
  }
  for (const run of sync.catchUp) {
    const writes = sync.writes === undefined ? '' : `${int(sync.writes.count)} API writes`
    lines.push(`| Catch-up after ${writes}, limit ${run.limit} | ${int(run.entries)} | ${int(run.calls)} | ${ms(run.firstMs)} ms (median of ${run.runs}: ${ms(run.medianMs)} ms) | ` +
      `${run.firstMs > 0 ? int(run.entries / run.firstMs * 1000) : '—'} | — | — | ${run.missing === 0 ? '—' : `${run.missing} created ids missing`} |`)
  }
  return lines
}

export const escapeXml = (s: string): string => s.replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c]!)

const COLORS: Record<Target, string> = { service: '#2563eb', baseline: '#9ca3af', ceiling: '#f59e0b', platformatic: '#16a34a' }

/**
 * Two horizontal bar panels, one line per row: req/s (log scale, as rows differ by orders of magnitude) and
 * p99 latency (log scale), with service, baseline and ceiling bars side by side, and the Platformatic
 * peer's when it ran.
 */
export function renderSvg (report: BenchReport): string {
  const series = reported(report)
  const labelWidth = 250
  const panelWidth = 330
  const gap = 40
  const barHeight = 9
  const rowHeight = barHeight * series.length + 10
  const top = 70
  const height = top + report.rows.length * rowHeight + 40
  const width = labelWidth + panelWidth * 2 + gap + 20
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="10" y="18" font-size="14" font-weight="bold">${escapeXml(`Benchmark: ${int(report.messages)} messages, ${report.connections} connections, ${report.durationSeconds} s per row`)}</text>`,
    `<text x="10" y="34" fill="#555">${escapeXml(machineLine(report.machine))}</text>`
  ]
  series.forEach((t, i) => {
    out.push(`<rect x="${10 + i * 90}" y="42" width="10" height="10" fill="${COLORS[t]}"/><text x="${24 + i * 90}" y="51">${t}</text>`)
  })
  const panels = [
    { title: 'requests/s (log scale, longer is better)', value: (m: Measurement) => m.rps, format: int },
    { title: 'p99 latency ms (log scale, shorter is better)', value: (m: Measurement) => m.p99, format: ms }
  ]
  panels.forEach((panel, p) => {
    const x0 = labelWidth + p * (panelWidth + gap)
    const values = report.rows.flatMap((r) => series.flatMap((t) => r.results[t] === undefined ? [] : [panel.value(r.results[t]!)]))
    const max = Math.max(10, ...values)
    const scale = (v: number): number => v <= 0 ? 0 : Math.max(1, (Math.log10(Math.max(1, v)) + 0.3) / (Math.log10(max) + 0.3) * (panelWidth - 60))
    out.push(`<text x="${x0}" y="${top - 6}" font-weight="bold">${escapeXml(panel.title)}</text>`)
    out.push(`<line x1="${x0}" y1="${top}" x2="${x0}" y2="${height - 40}" stroke="#333"/>`)
    report.rows.forEach((row, r) => {
      let y = top + r * rowHeight + 4
      for (const t of series) {
        const m = row.results[t]
        if (m !== undefined) {
          const w = scale(panel.value(m))
          out.push(`<rect x="${x0}" y="${y}" width="${w.toFixed(1)}" height="${barHeight}" fill="${failed(m) ? '#dc2626' : COLORS[t]}"/>`)
          out.push(`<text x="${(x0 + w + 3).toFixed(1)}" y="${y + barHeight - 1}" font-size="9">${panel.format(panel.value(m))}${failed(m) ? ' FAILED' : ''}</text>`)
        }
        y += barHeight
      }
    })
  })
  report.rows.forEach((row, r) => {
    // The label's baseline halfway down the row's bars.
    const y = top + r * rowHeight + 4 + barHeight * series.length / 2 + 4.5
    out.push(`<text x="${labelWidth - 8}" y="${y}" text-anchor="end">${escapeXml(row.name)}</text>`)
  })
  out.push(`<text x="10" y="${height - 14}" fill="#555">${escapeXml(`${report.date}; red bars: the row had non-2xx responses, errors or wrong bodies`)}</text>`)
  out.push('</svg>')
  return out.join('\n') + '\n'
}
