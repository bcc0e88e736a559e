/**
 * Cost against size: several benchmark runs of the same rows at different table sizes, as one table
 * and one chart (requests per second against rows, both on log scales). Pure functions, no I/O.
 */
import { escapeXml, int, type BenchReport } from './bench-report.js'

/** The rows the curve follows, in the order shown; a row missing from a run is left blank. */
export const CURVE_ROWS = ['page1-25', 'filtered', 'search', 'random-id', 'random-created', 'random-subject', 'random-search', 'post'] as const
/** Cold rows may cost more as the index grows deeper, up to this factor from the smallest to the largest table. */
export const COLD_GROWTH_LIMIT = 2
const COLD = new Set<string>(['random-id', 'random-created', 'random-subject', 'random-search'])

const sizeOf = (report: BenchReport): number => report.size ?? report.messages
const mb = (bytes: number): string => `${int(bytes / 1e6)} MB`

function rps (report: BenchReport, key: string): number | undefined {
  const m = report.rows.find((row) => row.key === key)?.results.service
  return m === undefined || m.problems.length > 0 ? undefined : m.rps
}

function nameOf (reports: BenchReport[], key: string): string {
  for (const report of reports) {
    const row = report.rows.find((r) => r.key === key)
    if (row !== undefined) return row.name.replace(/^random page of [\d,]+,/, 'random page,').replace(/ \([\d.]+% of rows\)/, '')
  }
  return key
}

/** The table: requests per second of each row at each size, the growth of its cost, then seed, size and memory. */
export function renderCurveMarkdown (runs: BenchReport[]): string {
  const reports = [...runs].sort((a, b) => sizeOf(a) - sizeOf(b))
  const first = reports[0]!
  const last = reports[reports.length - 1]!
  const header = `| Row (service req/s) | ${reports.map((r) => int(sizeOf(r))).join(' | ')} | Cost ${int(sizeOf(last))} ÷ ${int(sizeOf(first))} |`
  const lines = [header, `|---|${reports.map(() => '---:').join('|')}|---:|`]
  for (const key of CURVE_ROWS) {
    const values = reports.map((r) => rps(r, key))
    if (values.every((v) => v === undefined)) continue
    const small = values[0]
    const large = values[values.length - 1]
    const growth = small !== undefined && large !== undefined && large > 0 ? small / large : undefined
    const verdict = growth === undefined ? '—' : `${growth.toFixed(2)}×${COLD.has(key) ? (growth <= COLD_GROWTH_LIMIT ? ' (≤ 2×: yes)' : ' (≤ 2×: no)') : ''}`
    lines.push(`| ${nameOf(reports, key)} | ${values.map((v) => v === undefined ? 'failed' : v < 10 ? v.toFixed(1) : int(v)).join(' | ')} | ${verdict} |`)
  }
  // The write row's cost in the database, where the server ran on the benchmark's machine (bench/database/cpu-per-write.ts).
  const postUs = reports.map((r) => r.rows.find((row) => row.key === 'post')?.results.service?.databaseUsPerWrite)
  if (postUs.some((us) => us !== undefined)) {
    const cell = (us: number | undefined, bulk: number | undefined) => us === undefined ? '—' : `${us.toFixed(0)} µs${bulk === undefined ? '' : ` (${(us / bulk).toFixed(2)}× INSERT … SELECT's ${bulk.toFixed(0)} µs a row)`}`
    lines.push(`| PostgreSQL CPU per created message (POST row) | ${reports.map((r, i) => cell(postUs[i], r.bulkInsert?.usPerRow)).join(' | ')} | |`)
  }
  lines.push(`| Seed (messages, time) | ${reports.map((r) => r.seed === undefined ? '—' : `${int(r.seed.messages)} in ${r.seed.seconds.toFixed(0)} s`).join(' | ')} | |`)
  lines.push(`| Database on disk | ${reports.map((r) => r.databaseBytes === undefined ? '—' : mb(r.databaseBytes)).join(' | ')} | |`)
  lines.push(`| Service peak RSS (any row) | ${reports.map((r) => `${int(Math.max(...r.rows.map((row) => row.results.service?.peakRssMb ?? 0)))} MB`).join(' | ')} | |`)
  return lines.join('\n') + '\n'
}

const COLORS = ['#2563eb', '#16a34a', '#9333ea', '#dc2626', '#ea580c', '#0891b2', '#ca8a04', '#4b5563']

/** Requests per second against rows, log scales, one line per row of CURVE_ROWS. */
export function renderCurveSvg (runs: BenchReport[]): string {
  const reports = [...runs].sort((a, b) => sizeOf(a) - sizeOf(b))
  const width = 760
  const height = 440
  const left = 70
  const right = 250
  const top = 40
  const bottom = 50
  const sizes = reports.map(sizeOf)
  const all = CURVE_ROWS.flatMap((key) => reports.map((r) => rps(r, key))).filter((v): v is number => v !== undefined && v > 0)
  const xMin = Math.log10(Math.min(...sizes)) - 0.15
  const xMax = Math.log10(Math.max(...sizes)) + 0.15
  const yMin = Math.floor(Math.log10(Math.min(...all)))
  const yMax = Math.ceil(Math.log10(Math.max(...all)))
  const x = (rows: number) => left + (Math.log10(rows) - xMin) / (xMax - xMin) * (width - left - right)
  const y = (value: number) => height - bottom - (Math.log10(value) - yMin) / Math.max(1, yMax - yMin) * (height - top - bottom)
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    '<text x="10" y="20" font-size="14" font-weight="bold">Requests per second against rows (service, log scales)</text>'
  ]
  for (let p = yMin; p <= yMax; p++) {
    out.push(`<line x1="${left}" x2="${width - right}" y1="${y(10 ** p)}" y2="${y(10 ** p)}" stroke="#e5e7eb"/>`,
      `<text x="${left - 6}" y="${y(10 ** p) + 4}" text-anchor="end">${p < 0 ? (10 ** p).toFixed(-p) : int(10 ** p)}</text>`)
  }
  for (const size of sizes) {
    out.push(`<line x1="${x(size)}" x2="${x(size)}" y1="${top}" y2="${height - bottom}" stroke="#e5e7eb"/>`,
      `<text x="${x(size)}" y="${height - bottom + 16}" text-anchor="middle">${int(size)}</text>`)
  }
  out.push(`<text x="${(left + width - right) / 2}" y="${height - 12}" text-anchor="middle">messages in the table</text>`)
  CURVE_ROWS.forEach((key, i) => {
    const points = reports.flatMap((r) => { const v = rps(r, key); return v === undefined || v <= 0 ? [] : [`${x(sizeOf(r)).toFixed(1)},${y(v).toFixed(1)}`] })
    if (points.length === 0) return
    const color = COLORS[i % COLORS.length]!
    out.push(`<polyline points="${points.join(' ')}" fill="none" stroke="${color}" stroke-width="2"${COLD.has(key) ? ' stroke-dasharray="5 3"' : ''}/>`)
    for (const point of points) { const [px, py] = point.split(','); out.push(`<circle cx="${px}" cy="${py}" r="3" fill="${color}"/>`) }
    const legendY = top + 10 + i * 18
    out.push(`<line x1="${width - right + 15}" x2="${width - right + 40}" y1="${legendY}" y2="${legendY}" stroke="${color}" stroke-width="2"${COLD.has(key) ? ' stroke-dasharray="5 3"' : ''}/>`,
      `<text x="${width - right + 46}" y="${legendY + 4}">${escapeXml(key)}</text>`)
  })
  out.push(`<text x="${width - right + 15}" y="${top + 10 + CURVE_ROWS.length * 18 + 8}" fill="#6b7280">dashed: cold (each request another page or term)</text>`, '</svg>')
  return out.join('\n') + '\n'
}
