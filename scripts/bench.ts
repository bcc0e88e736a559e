import { spawn, type ChildProcess } from 'node:child_process'
import type { EventEmitter } from 'node:events'
import { mkdirSync, openSync, closeSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { createServer } from 'node:net'
import { cpus } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import type { FastifyInstance } from 'fastify'
import postgres from 'postgres'
import { buildDevIdp, createTokenSigner, DEFAULT_KEYS_DIR, loadOrCreateKeys } from '../src/dev-idp/app.js'
import { createRandom, formatSummary, generateMessage, seedDatabase, seedUser, SEARCH_WORDS } from './seed.js'

const USAGE = `Usage: DATABASE_URL=postgres://... npm run bench -- [--duration <s>] [--connections <n>] [--messages <n>]

Seeds the database when it has fewer than --messages messages, starts the API server as a child process
on a free loopback port, and drives it with autocannon. Writes the table to bench-results/latest.md.

Options:
  --duration <s>     seconds per row (default 10)
  --connections <n>  concurrent connections per row (default 50)
  --messages <n>     messages the database must hold (default 100000)
  -h, --help         show this help
`

// autocannon ships no types; only what this script uses is declared.
interface CannonRequest {
  method?: string
  path?: string
  headers?: Record<string, string>
  body?: string
  setupRequest?: (request: CannonRequest) => CannonRequest
}
interface CannonOptions {
  url: string
  connections: number
  duration: number
  maxOverallRequests: number
  timeout: number
  method?: string
  headers?: Record<string, string>
  requests?: CannonRequest[]
  verifyBody?: (body: string) => boolean
}
interface CannonResult {
  requests: { average: number, total: number }
  latency: { p50: number, p99: number }
  non2xx: number
  errors: number
  timeouts: number
  mismatches: number
  statusCodeStats: Record<string, { count: number }>
}
interface CannonInstance extends EventEmitter { stop: () => void }
type Autocannon = (options: CannonOptions, done: (err: Error | null, result: CannonResult) => void) => CannonInstance
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon

const SEARCH_WORD: keyof typeof SEARCH_WORDS = 'quokka'
const POST_SUBJECTS = 200
const SEED_USERS = 500
// Every Nth response body of a list row is parsed and checked; all of them would slow the load generator.
const VERIFY_EVERY = 20
// Paths hang off the project root, so the script works from any working directory.
const ROOT = fileURLToPath(new URL('..', import.meta.url))
const RESULTS_DIR = join(ROOT, 'bench-results')
const LOG_FILE = join(RESULTS_DIR, 'server.log')
const RESULTS_FILE = join(RESULTS_DIR, 'latest.md')
const KEYS_DIR = join(ROOT, DEFAULT_KEYS_DIR)

class BenchError extends Error {}

interface PageExpectation {
  page: number
  limit: number
  total: number
  /** Checks the order or content of the items; returns a problem or undefined. */
  items?: (data: Array<Record<string, unknown>>) => string | undefined
}

interface Row {
  name: string
  options: Omit<CannonOptions, 'url' | 'connections' | 'duration' | 'maxOverallRequests' | 'timeout'>
  /** List rows: what every page must look like. */
  page?: { path: string, expect: PageExpectation }
}

interface RowResult {
  name: string
  requests: number
  rps: number
  p50: number
  p99: number
  non2xx: number
  errors: number
  problems: string[]
}

function pageProblem (body: string, expect: PageExpectation): string | undefined {
  let parsed: { data?: unknown, pagination?: Record<string, unknown> }
  try {
    parsed = JSON.parse(body) as typeof parsed
  } catch {
    return `body is not JSON: ${body.slice(0, 80)}`
  }
  const { data, pagination } = parsed
  if (!Array.isArray(data) || pagination === undefined) return `not a page: ${body.slice(0, 80)}`
  const totalPages = Math.ceil(expect.total / expect.limit)
  const length = expect.page < totalPages ? expect.limit : expect.page === totalPages ? expect.total - (totalPages - 1) * expect.limit : 0
  const want = { page: expect.page, limit: expect.limit, total: expect.total, totalPages }
  for (const [key, value] of Object.entries(want)) {
    if (pagination[key] !== value) return `pagination.${key} is ${String(pagination[key])}, expected ${value}`
  }
  if (data.length !== length) return `${data.length} items, expected ${length}`
  return expect.items?.(data as Array<Record<string, unknown>>)
}

function sampledVerifier (expect: PageExpectation): (body: string) => boolean {
  let seen = 0
  return (body) => seen++ % VERIFY_EVERY !== 0 || pageProblem(body, expect) === undefined
}

const idsAscending = (data: Array<Record<string, unknown>>): string | undefined =>
  data.every((item, i) => i === 0 || Number(item.id) > Number(data[i - 1]!.id)) ? undefined : 'ids not ascending'

function freePort (): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address()
      probe.close(() => typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port')))
    })
  })
}

function positiveInteger (name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new BenchError(`--${name} must be a positive whole number`)
  return Number(value)
}

function logTail (): string {
  try {
    return readFileSync(LOG_FILE, 'utf8').trim().split('\n').slice(-15).join('\n')
  } catch {
    return ''
  }
}

// Everything that must not outlive the benchmark, torn down by cleanup() on success, error or signal.
let server: ChildProcess | undefined
let idp: FastifyInstance | undefined
let current: CannonInstance | undefined
let stopping = false

const serverRunning = (): boolean => server !== undefined && server.exitCode === null && server.signalCode === null

async function cleanup (): Promise<void> {
  current?.stop()
  if (serverRunning()) {
    const exited = new Promise((resolve) => server!.once('exit', resolve))
    server!.kill('SIGTERM')
    await Promise.race([exited, sleep(5000)])
    if (serverRunning()) server!.kill('SIGKILL')
  }
  await idp?.close()
  idp = undefined
}

// Last resort when the process exits without cleanup() (an uncaught error, process.exit elsewhere).
process.on('exit', () => { if (serverRunning()) server!.kill('SIGKILL') })
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    stopping = true
    process.stderr.write(`bench: ${signal}, stopping\n`)
    cleanup().finally(() => process.exit(130)).catch(() => {})
  })
}

async function startServer (env: NodeJS.ProcessEnv, base: string): Promise<void> {
  mkdirSync(RESULTS_DIR, { recursive: true })
  const log = openSync(LOG_FILE, 'w')
  server = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], { cwd: ROOT, env, stdio: ['ignore', log, log] })
  closeSync(log)
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    if (!serverRunning()) throw new BenchError(`the server exited during start-up (${LOG_FILE}):\n${logTail()}`)
    try {
      const response = await fetch(`${base}/health/ready`, { signal: AbortSignal.timeout(2000) })
      if (response.ok) return
    } catch {}
    await sleep(250)
  }
  throw new BenchError(`the server was not ready after 60 s (${LOG_FILE}):\n${logTail()}`)
}

function runCannon (options: CannonOptions): Promise<CannonResult> {
  return new Promise((resolve, reject) => {
    // Belt and braces: autocannon stops itself after `duration`, this stops it if it does not.
    const watchdog = setTimeout(() => current?.stop(), (options.duration + 30) * 1000)
    current = autocannon(options, (err, result) => {
      clearTimeout(watchdog)
      current = undefined
      if (err !== null) reject(err)
      else resolve(result)
    })
  })
}

async function checkPage (base: string, path: string, expect: PageExpectation): Promise<string | undefined> {
  const response = await fetch(base + path, { signal: AbortSignal.timeout(10_000) })
  const body = await response.text()
  if (response.status !== 200) return `${path} answered ${response.status}: ${body.slice(0, 80)}`
  const problem = pageProblem(body, expect)
  return problem === undefined ? undefined : `${path}: ${problem}`
}

interface Expected { total: number, urgent: number, search: number }

async function expectedCounts (url: string): Promise<Expected> {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    const pattern = `%${SEARCH_WORD}%`
    const [row] = await sql<Array<{ total: number, urgent: number, search: number }>>`
      select count(*)::int as total,
        count(*) filter (where priority = 'urgent')::int as urgent,
        count(*) filter (where content ilike ${pattern} or subject ilike ${pattern})::int as search
      from messages`
    if (row === undefined) throw new BenchError('could not count messages')
    return row
  } finally {
    await sql.end({ timeout: 5 })
  }
}

function listRow (name: string, path: string, expect: PageExpectation): Row {
  return { name, options: { requests: [{ method: 'GET', path }], verifyBody: sampledVerifier(expect) }, page: { path, expect } }
}

function buildRows (expected: Expected, userTokens: string[], adminToken: string): Row[] {
  const rows: Row[] = [{ name: 'GET /health', options: { requests: [{ method: 'GET', path: '/health' }] } }]
  for (const limit of [25, 100]) {
    const last = Math.max(1, Math.ceil(expected.total / limit))
    const pages: Array<[string, number]> = [['first', 1], ['middle', Math.ceil(last / 2)], ['last', last]]
    for (const [label, page] of pages) {
      rows.push(listRow(`GET /v2/messages ${label} page (limit ${limit}, page ${page})`,
        `/v2/messages?page=${page}&limit=${limit}`, { page, limit, total: expected.total, items: idsAscending }))
    }
  }
  rows.push(listRow('GET /v2/messages?priority=urgent, newest first', '/v2/messages?priority=urgent&sort=createdAt&order=desc&limit=25', {
    page: 1,
    limit: 25,
    total: expected.urgent,
    items: (data) => data.every((m, i) => m.priority === 'urgent' && (i === 0 || String(m.createdAt) <= String(data[i - 1]!.createdAt)))
      ? undefined
      : 'not all urgent, or not newest first'
  }))
  rows.push(listRow(`GET /v2/messages/search?q=${SEARCH_WORD}`, `/v2/messages/search?q=${SEARCH_WORD}&limit=25`, {
    page: 1,
    limit: 25,
    total: expected.search,
    items: (data) => data.every((m) => `${String(m.content)} ${String(m.subject)}`.toLowerCase().includes(SEARCH_WORD))
      ? undefined
      : `an item without "${SEARCH_WORD}"`
  }))
  rows.push({
    name: 'GET /v2/hello (Admin token)',
    options: { requests: [{ method: 'GET', path: '/v2/hello', headers: { authorization: `Bearer ${adminToken}` } }] }
  })
  const random = createRandom(42)
  // The API takes no null subject: a message without one leaves the member out.
  const bodies = Array.from({ length: 1000 }, () => {
    const { subject, ...message } = generateMessage(random)
    return JSON.stringify(subject === null ? message : { ...message, subject })
  })
  let sent = 0
  rows.push({
    name: `POST /v2/messages (${userTokens.length} subjects, RS256)`,
    options: {
      requests: [{
        method: 'POST',
        path: '/v2/messages',
        headers: { 'content-type': 'application/json' },
        setupRequest (request) {
          const n = sent++
          return {
            ...request,
            headers: { ...request.headers, authorization: `Bearer ${userTokens[n % userTokens.length]!}` },
            body: bodies[n % bodies.length]!
          }
        }
      }]
    }
  })
  // Measured again at the end: on a shared machine the baseline drifts, and this shows by how much.
  rows.push({ name: 'GET /health (again, last)', options: rows[0]!.options })
  return rows
}

const ms = (value: number): string => value.toFixed(value < 10 ? 2 : 1)

function renderTable (results: RowResult[]): string {
  const lines = [
    '| Row | Requests | Req/s | p50 ms | p99 ms | Non-2xx | Errors | Status |',
    '|---|---:|---:|---:|---:|---:|---:|---|'
  ]
  for (const r of results) {
    const status = r.problems.length === 0 ? 'ok' : 'FAILED'
    lines.push(`| ${r.name} | ${r.requests} | ${Math.round(r.rps)} | ${ms(r.p50)} | ${ms(r.p99)} | ${r.non2xx} | ${r.errors} | ${status} |`)
  }
  const health = results[0]
  if (health !== undefined && health.rps > 0) {
    lines.push('', 'Throughput relative to GET /health, same run:', '')
    for (const r of results) {
      if (r !== health) lines.push(`- ${r.name} = ${(r.rps / health.rps).toFixed(2)}× health`)
    }
  }
  const failed = results.filter((r) => r.problems.length > 0)
  if (failed.length > 0) {
    lines.push('', 'Failures:', '')
    for (const r of failed) lines.push(`- ${r.name}: ${r.problems.join('; ')}`)
  }
  return lines.join('\n') + '\n'
}

async function main (args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      duration: { type: 'string' },
      connections: { type: 'string' },
      messages: { type: 'string' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) {
    process.stdout.write(USAGE)
    return 0
  }
  const duration = positiveInteger('duration', values.duration, 10)
  const connections = positiveInteger('connections', values.connections, 50)
  const messages = positiveInteger('messages', values.messages, 100_000)
  const databaseUrl = process.env.DATABASE_URL ?? ''
  if (!/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new BenchError('DATABASE_URL must point to a PostgreSQL server (postgres://...); the benchmark does not run on the embedded database')
  }

  let seeded
  try {
    seeded = await seedDatabase({ url: databaseUrl, messages, users: SEED_USERS, ifEmpty: true })
  } catch (err) {
    throw new BenchError(`cannot prepare the database at DATABASE_URL: ${(err as Error).message}`)
  }
  process.stdout.write(formatSummary(seeded) + '\n')

  const audience = process.env.API_AUDIENCE ?? 'backend-3-messages'
  const idpPort = await freePort()
  const issuer = `http://127.0.0.1:${idpPort}`
  idp = await buildDevIdp({ issuer, audience, dataDir: KEYS_DIR })
  await idp.listen({ host: '127.0.0.1', port: idpPort })
  const sign = createTokenSigner(await loadOrCreateKeys(KEYS_DIR), { issuer, audience })
  // Seeded subjects already have local users; any that do not are provisioned through userinfo on first use.
  const userTokens = await Promise.all(Array.from({ length: POST_SUBJECTS }, async (_, i) => {
    const user = seedUser(i + 1)
    return (await sign({ sub: user.subjectId, role: user.role, email: user.email, name: user.name })).accessToken
  }))
  const adminToken = (await sign({ sub: 'bench-admin', role: 'Admin', email: 'bench-admin@example.com', name: 'Bench Admin' })).accessToken

  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  await startServer({
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    RATE_LIMIT_MAX: '0',
    LOG_LEVEL: 'warn',
    DATABASE_URL: databaseUrl,
    AUTH_ISSUER: issuer,
    API_AUDIENCE: audience
  }, base)
  server!.once('exit', () => current?.stop())

  const expected = await expectedCounts(databaseUrl)
  const rows = buildRows(expected, userTokens, adminToken)
  const bounds = { connections, timeout: 10, maxOverallRequests: Math.max(connections, duration * 50_000) }

  // Unreported warm-up, so the first row does not pay for JIT compilation and pool connections.
  await runCannon({ url: base, ...bounds, connections: Math.min(10, connections), duration: 2, requests: rows.slice(0, 4).flatMap((r) => r.options.requests ?? []) })

  const results: RowResult[] = []
  for (const row of rows) {
    const problems: string[] = []
    if (row.page !== undefined) {
      const before = await checkPage(base, row.page.path, row.page.expect)
      if (before !== undefined) problems.push(`before the run, ${before}`)
    }
    const result = await runCannon({ url: base, ...bounds, duration, ...row.options })
    if (!serverRunning()) throw new BenchError(`the server exited during "${row.name}" (${LOG_FILE}):\n${logTail()}`)
    if (row.page !== undefined) {
      const after = await checkPage(base, row.page.path, row.page.expect)
      if (after !== undefined) problems.push(`after the run, ${after}`)
    }
    const errors = result.errors + result.timeouts
    if (result.non2xx > 0) {
      const codes = Object.entries(result.statusCodeStats).filter(([code]) => !code.startsWith('2')).map(([code, s]) => `${s.count}× ${code}`)
      problems.push(`non-2xx responses: ${codes.join(', ')}`)
    }
    if (errors > 0) problems.push(`${result.errors} connection errors (${result.timeouts} timeouts)`)
    if (result.mismatches > 0) problems.push(`${result.mismatches} sampled bodies failed the page checks`)
    results.push({
      name: row.name,
      requests: result.requests.total,
      rps: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      non2xx: result.non2xx,
      errors,
      problems
    })
    await sleep(500)
  }

  const table = renderTable(results)
  const header = `# Benchmark, ${new Date().toISOString()}\n\n` +
    `Node ${process.version}, ${cpus().length} cores, ${duration} s and ${connections} connections per row, ` +
    `${expected.total} messages, server and load generator on one machine. ` +
    `List bodies sampled 1 in ${VERIFY_EVERY} and checked before and after each row.\n\n`
  writeFileSync(RESULTS_FILE, header + table)
  process.stdout.write('\n' + table)
  return results.some((r) => r.problems.length > 0) ? 1 : 0
}

try {
  process.exitCode = await main(process.argv.slice(2))
} catch (err) {
  const usage = (err as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS') === true
  // After a signal, failures are the interruption itself; the handler reports and exits.
  if (!stopping) process.stderr.write(`bench: ${err instanceof BenchError || usage ? (err as Error).message : (err as Error).stack ?? String(err)}\n${usage ? `\n${USAGE}` : ''}`)
  process.exitCode = stopping ? 130 : 1
} finally {
  await cleanup()
}
