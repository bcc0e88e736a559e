import t from 'tap'
import { renderCurveMarkdown, renderCurveSvg } from '../../bench/report/size-curve.js'
import type { BenchReport } from '../../bench/report/bench-report.js'
import { readDocument } from '../helpers/markdown.js'

// The size curves docs/performance.md shows are what `npm run bench:curve` makes of the committed runs:
// drawn again here from their JSON, they must be the committed chart and table byte for byte.

const CURVES = [
  { name: 'size-curve-debian', runs: ['size-debian-100000', 'size-debian-1000000', 'size-debian-10000000'] },
  { name: 'size-curve', runs: ['size-100000', 'size-1000000', 'size-10000000'] }
]

for (const { name, runs } of CURVES) {
  t.test(`bench/results/${name}.{svg,md} are drawn from ${runs.join(', ')}.json`, async (t) => {
    const reports = runs.map((run) => JSON.parse(readDocument(`bench/results/${run}.json`)) as BenchReport)
    t.same(reports.map((report) => report.size), [100_000, 1_000_000, 10_000_000], 'one run at each size')
    const svg = renderCurveSvg(reports)
    t.match(svg, /^<svg /)
    t.equal(svg, readDocument(`bench/results/${name}.svg`), 'the committed chart')
    t.equal(renderCurveMarkdown(reports), readDocument(`bench/results/${name}.md`), 'the committed table')
    t.equal(renderCurveSvg([...reports].reverse()), svg, 'whatever order the runs are given in')
  })
}

t.test('docs/performance.md shows the curve of the newest full sitting', async (t) => {
  t.match(readDocument('docs/performance.md'), '](../bench/results/size-curve-debian.svg)')
})
