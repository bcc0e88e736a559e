import t from 'tap'
import { execFileSync } from 'node:child_process'
import { basename } from 'node:path'
import { ROOT, documents, readDocument } from '../helpers/markdown.js'

// bench/results/ is ignored by git; a run's summary is committed by force only when a document cites it
// (bench/README.md, "Results"). So every committed file there must be cited by README.md, docs/*.md or
// docs/journal/*.md: by its name, by a name pattern the shell would expand to it (`size-{a,b}.json`,
// `post-with*.md`, or a tail after one: `a-{b,c}-{d,e}.md`, `-f.md`), or as the `--out` name of the run
// that wrote it (`<name>.md`, `.json`, `.svg`).

const CITING = /^(README\.md|docs\/[^/]+\.md|docs\/journal\/[^/]+\.md)$/

/** `a{b,c}d` → `abd`, `acd`, innermost braces first, as the shell expands them. */
function expandBraces (pattern: string): string[] {
  const inner = /\{([^{}]*)\}/.exec(pattern)
  if (inner === null) return [pattern]
  const before = pattern.slice(0, inner.index)
  const after = pattern.slice(inner.index + inner[0].length)
  return inner[1]!.split(',').flatMap((choice) => expandBraces(before + choice + after))
}

/** The file names a document cites, as regular expressions over a file's name. */
function citations (markdown: string): RegExp[] {
  const patterns: string[] = []
  // Code blocks are read too: that is where the `--out` names stand.
  for (const line of markdown.split('\n')) {
    let previous = ''
    for (const match of line.matchAll(/[\w.*{},$-]*[\w*}]\.(?:\{[\w,]+\}|md|json|svg|txt)(?![\w])/g)) {
      // `a-{b,c}-{d,e}.md`, `-f.md`: the second names a's files with its own tail, `a-{b,c}-f.md`.
      const name = match[0].startsWith('-') && previous.includes('-{') ? previous.slice(0, previous.lastIndexOf('-{')) + match[0] : match[0]
      patterns.push(previous = name)
    }
    for (const match of line.matchAll(/--out\s+([\w.{},-]+)/g)) patterns.push(`${match[1]!}.{md,json,svg}`)
  }
  return patterns.flatMap(expandBraces).map((name) => name.replace(/^.*\//, '')).map((name) =>
    new RegExp('^' + name.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*') + '$'))
}

t.test('names, patterns and --out names are citations', async (t) => {
  t.same(expandBraces('s42-{before,after}-size{1m,10m}.md'), ['s42-before-size1m.md', 's42-before-size10m.md', 's42-after-size1m.md', 's42-after-size10m.md'])
  const cited = (text: string, name: string): boolean => citations(text).some((re) => re.test(name))
  t.ok(cited('see `bench/results/reference-1m.md`', 'reference-1m.md'))
  t.ok(cited('(`bench/results/size-curve.{md,svg}`)', 'size-curve.svg'))
  t.ok(cited('`bench/results/post-with*.md`', 'post-with2.md'))
  t.ok(cited('  --rows page1-25 --targets service --out anchors-10m', 'anchors-10m.json'))
  t.ok(cited('(`bench/results/s42-{before,after}-{10m,1m}-c1.md`, `-10m-c50.md`)', 's42-before-10m-c50.md'), 'a tail after a pattern')
  t.notOk(cited('`bench/results/size-curve.md`', 'size-curve.svg'))
  t.notOk(cited('`bench/results/ab-after.md`', 'ab-after-size1m-1.md'))
})

t.test('every committed file under bench/results is cited by a document', async (t) => {
  const tracked = execFileSync('git', ['ls-files', '-z', 'bench/results'], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter(Boolean)
  t.ok(tracked.length > 0, `${tracked.length} committed result files`)
  const patterns = documents().filter((path) => CITING.test(path)).flatMap((path) => citations(readDocument(path)))
  t.same(tracked.filter((file) => !patterns.some((re) => re.test(basename(file)))), [], 'no committed result file that no document cites')
})
