import t from 'tap'
import { existsSync, statSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { ROOT, anchors, documents, links, readDocument, slug } from '../helpers/markdown.js'

// Every relative link of README.md, bench/README.md, src/pages/README.md and docs/**/*.md reaches a file of the project,
// and every #fragment a heading (GitHub's slugs) or an explicit anchor of the document it names.

const EXTERNAL = /^[a-z][a-z\d+.-]*:|^\/\//i

t.test('slugs as GitHub makes them', async (t) => {
  t.equal(slug('Keep an offline copy: delta sync with `GET /v2/messages/changes`'), 'keep-an-offline-copy-delta-sync-with-get-v2messageschanges')
  t.equal(slug('A common word at 10,000,000'), 'a-common-word-at-10000000')
  t.equal(slug('Browsers on other origins: `CORS_ORIGINS`'), 'browsers-on-other-origins-cors_origins')
  t.equal(slug('A real peer: Platformatic DB'), 'a-real-peer-platformatic-db')
  t.equal(slug('**Bold** and [a link](x.md) — with a dash'), 'bold-and-a-link--with-a-dash')
  t.same([...anchors('# A\n\n```\n# not a heading\n```\n## A\n## B <a id="b-again"></a>\n')], ['a', 'a-1', 'b', 'b-again'],
    'repeats are numbered, code is not a heading, explicit anchors count')
})

t.test('every relative link and anchor resolves', async (t) => {
  const docs = documents()
  t.ok(docs.includes('README.md') && docs.includes('docs/performance.md'), 'the documents are found')
  const anchorsOf = new Map<string, Set<string>>()
  const anchorsIn = (path: string): Set<string> => {
    let found = anchorsOf.get(path)
    if (found === undefined) anchorsOf.set(path, found = anchors(readDocument(path)))
    return found
  }
  const broken: string[] = []
  let checked = 0
  for (const doc of docs) {
    for (const { line, target } of links(readDocument(doc))) {
      if (EXTERNAL.test(target)) continue
      checked++
      const [rawPath = '', fragment] = target.split('#', 2)
      const path = rawPath === '' ? doc : normalize(relative(ROOT, join(ROOT, dirname(doc), decodeURIComponent(rawPath))))
      const where = `${doc}:${line}: ${target}`
      if (path.startsWith('..') || !existsSync(join(ROOT, path))) {
        broken.push(`${where} (no file ${path})`)
        continue
      }
      if (fragment === undefined || fragment === '') continue
      if (statSync(join(ROOT, path)).isDirectory() || !path.endsWith('.md')) broken.push(`${where} (an anchor into ${path}, which is not a Markdown file)`)
      else if (!anchorsIn(path).has(decodeURIComponent(fragment))) broken.push(`${where} (no heading or anchor "${fragment}" in ${path})`)
    }
  }
  t.ok(checked > 50, `${checked} relative links checked`)
  t.same(broken, [], 'no broken link')
})
