/** `npm run bench:curve`: benchmark runs at several table sizes as one table and chart (bench/report/size-curve.ts). */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { renderCurveMarkdown, renderCurveSvg } from './report/size-curve.js'
import type { BenchReport } from './report/bench-report.js'

const USAGE = `Usage: npm run bench:curve -- [--out <name>] <run.json> <run.json> ...

Reads benchmark runs of the same rows at different table sizes (npm run bench -- --messages N --out size-N)
and writes bench/results/<name>.{md,svg} (default size-curve): requests per second of each row at each size, how much
costlier each row is on the largest table than on the smallest, seed time, database size and peak RSS.
`

// bench/results/, as RESULTS_DIR in bench/run/locations.ts (not imported: it loads the database client).
const RESULTS_DIR = fileURLToPath(new URL('./results', import.meta.url))

function main (args: string[]): number {
  const at = args.indexOf('--out')
  const name = at === -1 ? 'size-curve' : args[at + 1] ?? ''
  const files = at === -1 ? args : args.filter((_, i) => i !== at && i !== at + 1)
  if (!/^[\w.-]+$/.test(name)) {
    process.stdout.write(USAGE)
    return 1
  }
  if (files.length < 2 || files.includes('-h') || files.includes('--help')) {
    process.stdout.write(USAGE)
    return files.length < 2 ? 1 : 0
  }
  const runs = files.map((file) => JSON.parse(readFileSync(file, 'utf8')) as BenchReport)
  const markdown = renderCurveMarkdown(runs)
  writeFileSync(join(RESULTS_DIR, `${name}.md`), markdown)
  writeFileSync(join(RESULTS_DIR, `${name}.svg`), renderCurveSvg(runs))
  process.stdout.write(markdown + `\nWritten to ${join(RESULTS_DIR, `${name}.{md,svg}`)}\n`)
  return 0
}

process.exitCode = main(process.argv.slice(2))
