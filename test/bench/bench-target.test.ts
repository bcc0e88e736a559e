import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { parseOptions } from '../../bench/run/command-line.js'
import { RESULTS_DIR } from '../../bench/run/locations.js'
import { unmetNeed } from '../../bench/rows/index.js'
import { failingStatuses } from '../../bench/run/measure-row.js'
import { renderMarkdown, type BenchReport, type Measurement } from '../../bench/report/bench-report.js'
import { LOADER_ARGS, LOADER_ENV } from '../helpers/server-process.js'
import { startSeededService } from '../helpers/seeded-service.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const BENCH = join(ROOT, 'bench/main.ts')
// Each row at most a second and 150 requests over 2 connections: what is asserted is which rows ran
// and what they did, never how fast.
const BOUNDS = ['--duration', '1', '--connections', '2', '--max-requests', '150']
const ROWS = 'health,random-id,search,cursor-25,hello,post,seek-floor,mix,search-flood'

/** `npm run bench -- args` as a child process, bounded in time; its exit code and output. */
async function bench (args: string[]): Promise<{ code: number | string | null, stdout: string, stderr: string }> {
  const child = spawn(process.execPath, [...LOADER_ARGS, BENCH, ...args], {
    cwd: ROOT,
    env: { ...LOADER_ENV, PATH: process.env.PATH ?? '' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
  const timer = setTimeout(() => { child.kill('SIGKILL') }, 120_000)
  const code = await new Promise<number | string | null>((resolve) => { child.on('exit', (exitCode, signal) => { resolve(exitCode ?? signal) }) })
  clearTimeout(timer)
  return { code, stdout, stderr }
}

const tableRow = (markdown: string, name: string): string => markdown.split('\n').find((line) => line.startsWith(`| ${name}`)) ?? `(no row ${name})`

const removeResults = (name: string) => async (): Promise<void> => {
  await Promise.all(['md', 'json', 'svg'].map(async (ext) => { await rm(join(RESULTS_DIR, `${name}.${ext}`), { force: true }) }))
}

t.test('--target: the rows against a service the benchmark did not start; writes only with --allow-writes', async (t) => {
  const began = performance.now()
  const service = await startSeededService(t, 100)
  t.comment(`service seeded and started in ${((performance.now() - began) / 1000).toFixed(1)} s`)
  const before = await service.total()
  const seeded = service.server.lines.length
  const out = `test-target-${process.pid}`
  t.teardown(removeResults(out))

  const reads = await bench(['--target', service.server.url, '--idp', service.issuer, '--rows', ROWS, ...BOUNDS, '--out', out])
  t.comment(`read-only run done after ${((performance.now() - began) / 1000).toFixed(1)} s`)
  t.equal(reads.code, 0, `the run passes\n${reads.stderr}\n${reads.stdout.slice(-3000)}`)
  const table = reads.stdout
  t.match(table, `# Benchmark of ${service.server.url}`)
  t.match(table, 'tokens minted by the deployment\'s identity provider (--idp); writes none made (no --allow-writes)')
  for (const name of ['GET /health', 'random page of 4, sort=id, limit 25', 'search "quokka"', 'cursor page after page 2', 'GET /v2/hello (RS256)']) {
    t.match(tableRow(table, name), /\| [\d,]+ \| [\d.]+ \| [\d.]+ \| 0 \/ 0 \| 0 \| [\d.]+ \| ok \|$/, `${name}: measured, ok`)
  }
  t.match(tableRow(table, 'post'), '| skipped: writes: run with --allow-writes |')
  t.match(tableRow(table, 'seek-floor'), '| skipped: needs the benchmark\'s own database and service: the database\'s floor is PostgreSQL\'s own seek')
  t.match(tableRow(table, 'mix'), 'skipped: needs the benchmark\'s own database and service')
  t.match(tableRow(table, 'search-flood'), 'skipped: needs the benchmark\'s own database and service')
  t.notMatch(table, /Baseline req\/s|Ceiling/, 'no peer columns')
  t.equal(await service.total(), before, 'no message was written')
  // The seed's own creates come as seed-writer, and the last of their log lines can arrive after the mark.
  const posts = (): string[] => service.server.lines.slice(seeded).filter((line) => line.includes('"method":"POST"') && !line.includes('"sub":"seed-writer"'))
  t.same(posts(), [], 'the service saw no POST')

  // Tokens from a file, as an operator would bring them, and writes allowed: the POST row runs.
  const { mint } = service
  const file = join(tmpdir(), `bench-target-tokens-${process.pid}`)
  await writeFile(file, `# callers\n${await mint('ops-admin', 'Admin')}\n\nBearer ${await mint('ops-user', 'User')}\n`)
  t.teardown(async () => { await rm(file, { force: true }) })
  const writes = await bench(['--target', service.server.url, '--token-file', file, '--allow-writes', '--rows', 'hello,post', ...BOUNDS, '--out', out])
  t.comment(`writing run done after ${((performance.now() - began) / 1000).toFixed(1)} s`)
  t.equal(writes.code, 0, `the run passes\n${writes.stderr}\n${writes.stdout.slice(-3000)}`)
  t.match(writes.stdout, 'tokens from --token-file; writes allowed (--allow-writes)')
  t.match(tableRow(writes.stdout, 'GET /v2/hello (RS256)'), /\| ok \|$/, 'the first token calls GET /v2/hello')
  t.match(tableRow(writes.stdout, 'POST /v2/messages'), /\| ok \|$/)
  t.ok(await service.total() > before, 'the POST row created messages')
  t.ok(posts().length > 0, 'the service saw them')
})

t.test('shed answers (503 with Retry-After) are counted apart; a 503 without Retry-After fails the row', async (t) => {
  // A stand-in deployment: of every four GET /v2/hello, two are answered, one is shed with Retry-After
  // and one is turned away with 503 alone.
  let hellos = 0
  const server = createServer((req, res) => {
    const json = (status: number, body: unknown, headers: Record<string, string> = {}): void => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body))
    }
    if (req.url === '/health') return json(200, { ok: true })
    if (req.url === '/v2/hello') {
      const n = hellos++ % 4
      if (n < 2) return json(200, { message: 'Hello, ops@example.com!', role: 'Admin' })
      return json(503, { error: 'Service unavailable' }, n === 2 ? { 'retry-after': '1' } : {})
    }
    if (req.url?.startsWith('/v2/messages?') === true) return json(200, { data: [], pagination: { page: 1, limit: 25, total: 0, totalPages: 0 } })
    json(404, { error: 'Not found' })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => { server.close() })
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const file = join(tmpdir(), `bench-target-shed-${process.pid}`)
  await writeFile(file, 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJvcHMifQ.c2lnbmF0dXJl\n')
  const out = `test-target-shed-${process.pid}`
  t.teardown(async () => { await rm(file, { force: true }); await removeResults(out)() })

  const run = await bench(['--target', url, '--token-file', file, '--rows', 'hello', ...BOUNDS, '--out', out])
  t.equal(run.code, 1, `the run fails on the 503s without Retry-After\n${run.stderr}`)
  const [, shed] = /\| \d+ \/ 0 \| ([\d,]+) \| [\d.]+ \| FAILED \|$/.exec(tableRow(run.stdout, 'GET /v2/hello (RS256)')) ?? []
  const [, refused] = /- GET \/v2\/hello \(RS256\) \(service\): non-2xx responses: (\d+)× 503 without Retry-After$/m.exec(run.stdout) ?? []
  t.ok(Number(shed) > 0 && Number(refused) > 0, `${String(shed)} shed, ${String(refused)} refused\n${run.stdout.slice(-2500)}`)
  // As many of one as of the other, give or take the requests in flight when the row stopped: the
  // shed ones are not among the failures.
  t.ok(Math.abs(Number(shed) - Number(refused)) <= 2, 'the failures are the 503s without Retry-After alone')
  t.match(run.stdout, /Shed: [\d,]+ answers 503 with Retry-After/)
})

t.test('--target options: checked, and refused where they do not belong', async (t) => {
  const options = parseOptions(['--target', 'http://127.0.0.1:8080/', '--idp', 'http://localhost:3002', '--allow-writes'])
  t.match(options, { target: { url: 'http://127.0.0.1:8080', idp: 'http://localhost:3002', allowWrites: true }, outName: 'target', targets: new Set(['service']) })
  t.notOk([...options!.keys].some((key) => key.startsWith('live-')), 'no live rows unless asked for')
  t.throws(() => parseOptions(['--idp', 'http://localhost:3002']), /--idp goes with --target/)
  t.throws(() => parseOptions(['--target', 'ftp://x']), /http or https/)
  t.throws(() => parseOptions(['--target', 'http://x', '--targets', 'service,baseline']), /does not go with --target/)
  t.throws(() => parseOptions(['--target', 'http://x', '--token-file', 'f', '--idp', 'http://y']), /give one/)

  t.equal(unmetNeed('page1-25', new Set()), undefined, 'a read row needs nothing')
  t.equal(unmetNeed('post', new Set(['token'])), 'writes: run with --allow-writes')
  t.match(unmetNeed('hello', new Set(['writes'])), /needs tokens/)
  t.match(unmetNeed('writes-id', new Set(['token', 'writes'])), /database/)
})

t.test('shed answers fail a row of the benchmark\'s own servers (CONTRACT 9), and not a target\'s', async (t) => {
  const stats = { 200: { count: 50 }, 503: { count: 30 }, 404: { count: 1 } }
  t.strictSame(failingStatuses(stats, [], 20, true), [['404', 1], ['503 (20 of them shed, with Retry-After)', 30]], 'own servers: every non-2xx answer fails the row')
  t.strictSame(failingStatuses(stats, [], 20, false), [['404', 1], ['503 without Retry-After', 10]], 'a target: the shed ones are counted apart')
  t.strictSame(failingStatuses({ 200: { count: 5 }, 503: { count: 4 } }, [], 4, false), [], 'a target whose 503s are all shed: no failure')
  t.strictSame(failingStatuses({ 404: { count: 3 } }, [404], 0, true), [], 'a status the row accepts is no failure')
})

t.test('shed answers (503 with Retry-After) are shown apart', async (t) => {
  const shed = (problems: string[] = []): Measurement =>
    ({ requests: 900, rps: 60, p50: 1.5, p99: 12, non2xx: 0, shed: 840, errors: 0, peakRssMb: 120, health: { count: 20, failed: 0, p99: 3.25, max: 4.5 }, problems })
  const report: BenchReport = {
    date: '2026-01-01T00:00:00.000Z',
    machine: { cpus: 2, cpuModel: 'Test CPU', memoryGb: 8, node: 'v20.0.0', postgres: 'PostgreSQL 15.0', os: 'Linux 6' },
    messages: 1000,
    durationSeconds: 8,
    connections: 50,
    rssLimitMb: 250,
    rows: [{ key: 'random-subject', name: 'random page', results: { service: shed() } }]
  }
  const local = renderMarkdown(report)
  t.match(tableRow(local, 'random page'), '| ok (840 shed) |')
  t.match(local, 'Shed: 840 answers 503 with Retry-After')
  t.notMatch(local, 'Failures:')
  const target = renderMarkdown({ ...report, rssLimitMb: undefined, target: { url: 'http://lb', tokens: 'none', writes: false }, rows: [...report.rows, { key: 'post', name: 'post', results: {}, skipped: 'writes: run with --allow-writes' }] })
  t.match(tableRow(target, 'random page'), '| 60 | 1.50 | 12.0 | 0 / 0 | 840 | 3.25 | ok |')
  t.match(tableRow(target, 'post'), '| — | — | — | — | — | — | skipped: writes: run with --allow-writes |')
  t.notMatch(target, 'Peak RSS on the embedded database')
})
