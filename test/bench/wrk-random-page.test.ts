import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { COLD_LIMIT, COLD_SORTS, COMMON_WORDS } from '../../bench/rows/cold.js'
import { rarePhrases } from '../../scripts/seed.js'
import { startSeededService } from '../helpers/seeded-service.js'
import { runWrkScript } from '../helpers/wrk-script.js'

const SCRIPT = fileURLToPath(new URL('../../bench/wrk/random-page.lua', import.meta.url))

/** The strings of a Lua table constant of the script: `local NAME = { 'a', 'b' }`. */
function luaList (source: string, name: string): string[] {
  const body = new RegExp(`local ${name} = \\{([^}]*)\\}`).exec(source)?.[1]
  if (body === undefined) throw new Error(`no ${name} in the script`)
  return [...body.matchAll(/'([^']*)'/g)].map((m) => m[1]!)
}

t.test('the wrk script asks what the cold rows ask', async (t) => {
  const source = await readFile(SCRIPT, 'utf8')
  t.same(luaList(source, 'COLD_SORTS'), COLD_SORTS.map((sort) => sort.query), 'the cold rows\' sorts, in their order')
  t.same(luaList(source, 'COMMON_WORDS'), [...COMMON_WORDS], 'the common words')
  const adjectives = luaList(source, 'ADJECTIVES')
  const nouns = luaList(source, 'NOUNS')
  const phrases = [...adjectives.flatMap((a) => nouns.map((n) => `${a} ${n}`)), ...nouns.flatMap((a) => nouns.filter((b) => b !== a).map((b) => `${a} for the ${b}`))]
  t.same(phrases, rarePhrases(), 'the rare phrases the seed writes')
  t.match(source, `local LIMIT = ${COLD_LIMIT}`)
})

t.test('the script, run as wrk runs it, against the service: every answer 2xx or shed, every kind sent, and its summary', async (t) => {
  const service = await startSeededService(t, 100)
  // Bounded twice: 150 answers (the script stops its thread there), and 300 requests of the harness.
  const run = await runWrkScript(SCRIPT, service.server.url, ['messages=100', 'max=150', 'forwarded=1'], 300)
  const totals = /random-page: answers=(\d+) ok=(\d+) shed=(\d+) failed=(\d+) errors=(\d+)/.exec(run.output)
  t.ok(totals, `the script's summary line\n${run.output}`)
  const [answers, ok, shed, failed, errors] = totals!.slice(1).map(Number) as [number, number, number, number, number]
  t.equal(answers, 150, 'the thread stopped at max=150 answers')
  t.equal(run.paths.length, 150, 'and sent no request after it')
  t.equal(ok + shed, answers, 'every answer 2xx or shed')
  t.equal(failed, 0)
  t.equal(errors, 0)
  const sentLine = /random-page: sent (.*)/.exec(run.output)?.[1] ?? ''
  const sent = Object.fromEntries([...sentLine.matchAll(/(\S+)=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]))
  t.same(Object.keys(sent), ['page-id', 'page-created-desc', 'page-subject', 'page-priority-desc', 'near-subject-desc', 'rare-phrase', 'common-word'], 'every kind counted')
  t.equal(Object.values(sent).reduce((n, k) => n + k, 0), 150, 'as many as were sent')
  t.ok(run.paths.every((path) => path.startsWith('/v2/messages?') || path.startsWith('/v2/messages/search?q=')), 'only pages and searches')
  const routes = new Set(service.server.lines.filter((line) => line.includes('"method":"GET"')).map((line) => (JSON.parse(line) as { route?: string }).route))
  t.ok(routes.has('/v2/messages') && routes.has('/v2/messages/search'), 'pages and searches reached the service')
})
