import { spawn, spawnSync } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { COLD_LIMIT, COLD_SORTS, COMMON_WORDS } from '../../bench/rows/cold.js'
import { rarePhrases } from '../../scripts/seed.js'
import { startSeededService } from '../helpers/seeded-service.js'

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

const wrk = spawnSync('wrk', ['-v'], { encoding: 'utf8' })
const installed = wrk.error === undefined

t.test('wrk runs the script against the service: every answer 2xx or shed', { skip: installed ? false : 'wrk is not installed (Debian: apt-get install wrk); it is optional' }, async (t) => {
  const service = await startSeededService(t, 100)
  // Bounded twice: two seconds, and 150 answers per thread (the script stops its thread there).
  const args = ['-t1', '-c2', '-d2s', '--timeout', '10s', '-s', SCRIPT, service.server.url, '--', 'messages=100', 'max=150', 'forwarded=1']
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
  const timer = setTimeout(() => { child.kill('SIGKILL') }, 60_000)
  const code = await new Promise<number | null>((resolve) => { child.on('exit', resolve) })
  clearTimeout(timer)
  t.equal(code, 0, `wrk exits 0\n${stderr}\n${stdout}`)
  const totals = /random-page: answers=(\d+) ok=(\d+) shed=(\d+) failed=(\d+) errors=(\d+)/.exec(stdout)
  t.ok(totals, `the script's summary line\n${stdout}`)
  const [answers, ok, shed, failed, errors] = totals!.slice(1).map(Number) as [number, number, number, number, number]
  t.ok(answers > 0 && answers <= 150 + 2, `${answers} answers, within the bound`)
  t.equal(ok + shed, answers, 'every answer 2xx or shed')
  t.equal(failed, 0)
  t.equal(errors, 0)
  const sent = /random-page: sent (.*)/.exec(stdout)?.[1] ?? ''
  t.match(sent, /page-id=\d+ page-created-desc=\d+ page-subject=\d+ page-priority-desc=\d+ near-subject-desc=\d+ rare-phrase=\d+ common-word=\d+/, 'every kind counted')
  const routes = new Set(service.server.lines.filter((line) => line.includes('"method":"GET"')).map((line) => (JSON.parse(line) as { route?: string }).route))
  t.ok(routes.has('/v2/messages') && routes.has('/v2/messages/search'), 'pages and searches reached the service')
})
