import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import type { EventEmitter } from 'node:events'
import { closeSync, cpSync, existsSync, mkdirSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { cpus, release, totalmem, type } from 'node:os'
import { isAbsolute, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import type { FastifyInstance } from 'fastify'
import { request } from 'undici'
import { DEFAULT_DATA_DIR } from '../src/db/client.js'
import { buildDevIdp, createTokenSigner, DEFAULT_KEYS_DIR, loadOrCreateKeys } from '../src/dev-idp/app.js'
import { EVERYTHING, pgliteOracle, postgresOracle, type Oracle, type Where } from '../bench/oracle.js'
import { pageQuery } from '../bench/paths.js'
import { platformaticMessageProblem, platformaticPageProblem, platformaticPath, platformaticPostBody } from '../bench/peer.js'
import { shuffled } from '../bench/sequence.js'
import { startWriter, type SteadyWriter } from '../bench/writer.js'
import { SERVICE_NODE_ARGS } from '../bench/service-args.js'
import { DEFAULT_TARGETS, renderMarkdown, renderSvg, TARGETS, type BenchReport, type Machine, type Measurement, type RowReport, type SyncReport, type Target } from '../bench/report.js'
import { freePort } from './free-port.js'
import { createRandom, formatSummary, generateMessage, rarePhrases, seedDatabase, seedUser, SEARCH_WORDS, SUBJECTS } from './seed.js'

const USAGE = `Usage: [DATABASE_URL=postgres://...] npm run bench -- [options]

Seeds the database when it holds fewer than --messages messages, starts the API server and, on PostgreSQL,
the naive baseline (bench/baseline.ts) and the ceiling (bench/ceiling.ts) as child processes on free loopback
ports, and drives each row against each of them with autocannon, probing GET /health throughout. With
--targets naming platformatic, Platformatic DB (bench/platformatic/, installed by \`npm run bench:peer\`) is
measured too, on the list, filtered, search and POST rows. On
PostgreSQL the delta sync section follows (row key \`sync\`, service only, one sequential client): the full
initial sync and the catch-up after 1,000 API writes.

Without DATABASE_URL the service runs on the embedded database, as \`npm start\` does, in a directory of the
benchmark's own (.data/bench/), and alone; the default rows are then <embedded rows>.

Writes bench-results/latest.{md,json,svg} (embedded: bench-results/embedded.{md,json,svg}).

Options:
  --messages <n>      messages the database must hold (default BENCH_ROWS, else 1000000; embedded 100000)
  --duration <s>      seconds per row and server (default 8)
  --connections <n>   concurrent connections (default 50; embedded 16)
  --max-requests <n>  request cap per row and server (default 60000 per second of --duration)
  --rows <a,b,...>    run only these rows (keys: <row keys>)
  --targets <a,b>     the servers to measure (default service,baseline,ceiling; service is required;
                      platformatic: the Platformatic DB peer, on PostgreSQL, after npm run bench:peer)
  --out <name>        write bench-results/<name>.{md,json,svg} (default latest; embedded: embedded)
  -h, --help          show this help
`

// autocannon ships no types; only what this script uses is declared.
interface CannonRequest {
  method?: string
  path?: string
  headers?: Record<string, string>
  body?: string
  setupRequest?: (request: CannonRequest, context: Record<string, unknown>) => CannonRequest
  onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: Record<string, string>) => void
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
  /** Seconds from the first request to the last answer. */
  duration: number
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
const SEED_USERS = 1000
const RSS_LIMIT_MB = 250
const RSS_SAMPLE_MS = 100
// Every Nth response body is parsed and checked; all of them would slow the load generator.
const VERIFY_EVERY = 20
// Paths hang off the project root, so the script works from any working directory.
const ROOT = fileURLToPath(new URL('..', import.meta.url))
const RESULTS_DIR = join(ROOT, 'bench-results')
const KEYS_DIR = join(ROOT, DEFAULT_KEYS_DIR)
// The embedded run's own directory, apart from the ./.data/pglite that `npm start` uses: the service runs
// with it as its working directory, so its default data directory is the one seeded here. The oracle
// (bench/oracle.ts) reads a copy of it taken before the service starts.
const EMBEDDED_DIR = join(ROOT, '.data', 'bench')
const EMBEDDED_DATA_DIR = join(EMBEDDED_DIR, DEFAULT_DATA_DIR)
const EMBEDDED_ORACLE_DIR = join(EMBEDDED_DIR, 'oracle')

// The Platformatic DB peer (bench/platformatic/): its own package and lock file, installed only by
// `npm run bench:peer`, never by the project's `npm ci`.
const PEER_DIR = join(ROOT, 'bench', 'platformatic')
const PEER_ENTRY = join(PEER_DIR, 'serve.mjs')
const PEER_ENTRY_INSTALLED = join(PEER_DIR, 'node_modules', '@platformatic', 'db', 'package.json')

class BenchError extends Error {}

/**
 * The peer's environment, read by the placeholders of bench/platformatic/platformatic.json: the same
 * database, issuer and audience as the service. Unlike the baseline's, its queries left running when a row
 * stops are waited for, not cancelled (settle()): it logs a cancelled query as an error, which the row's
 * log check would charge to it.
 */
function peerEnv (databaseUrl: string, issuer: string, audience: string): NodeJS.ProcessEnv {
  return { ...process.env, PLT_DATABASE_URL: databaseUrl, PLT_AUTH_ISSUER: issuer, PLT_API_AUDIENCE: audience }
}

type Item = Record<string, unknown>

interface PageExpectation {
  page: number
  limit: number
  total: number
  /** The exact ids of the page, from a naive query run before the row. */
  ids: number[]
  /** Pages read while rows are written: the stated total may be anything from `total` up to this. */
  totalUpTo?: number
  /** Checks the content of the items; returns a problem or undefined. */
  items?: (data: Item[]) => string | undefined
}

interface Row {
  key: string
  name: string
  targets: readonly Target[]
  /** Builds the autocannon request options for one server (POST needs fresh subjects per server). */
  requests: (target: Target) => CannonRequest[]
  /** Sampled check of a response body; returns a problem or undefined. */
  verify?: (body: string) => string | undefined
  /** List rows: the path checked once before and once after the load. */
  page?: { path: string, expect: PageExpectation }
  /** POST: the message count must grow by exactly the number of 201 responses. */
  countsWrites?: boolean
  /** Statuses besides 2xx that count as success (a revalidation's 304). */
  alsoOk?: readonly number[]
  /** The row of this run the service's rate is compared with, and the ratio it must reach. */
  reference?: { key: string, target: number }
  /** Runs once before the row is measured (the delta sync poll's walk to a caught-up token). */
  prepare?: () => Promise<void>
  /** Cold rows: each request asks for the next path of a fixed sequence instead of `requests`. */
  sequence?: Sequence
  /** Seconds, when the row runs longer than --duration (the random mix). */
  duration?: number
  /** A writer started beside the row's load and stopped after it (the cold rows under writes). */
  writer?: (child: Child) => SteadyWriter
  /** The row as the Platformatic peer is asked it, for the rows it has an equivalent of. */
  platformatic?: PeerRow
}

/**
 * A row for the Platformatic peer (bench/peer.ts): its own requests, and checks that see the headers,
 * since a page's total is a header there (X-Total-Count), not a member of the body.
 */
interface PeerRow {
  requests: () => CannonRequest[]
  /** Check of a sampled 2xx answer; returns a problem or undefined. */
  verify: (body: string, headers: Record<string, string | undefined>) => string | undefined
  /** List rows: the peer's path, checked once before and once after the load. */
  page?: string
  /** The one status every answer must have (POST: Platformatic creates with 200, not 201). */
  status?: number
}

/**
 * The requests of a cold row: distinct pages or terms in a fixed-seed order, the same for every server, so
 * no answer is asked for twice and no cache can serve it. A row stops at the end of its sequence.
 */
interface Sequence {
  paths: string[]
  /** The exact answer to one path, from the oracle; sampled answers are checked against it after the row. */
  expect: (path: string) => Promise<PageExpectation>
  /** Goes round again at the end instead of stopping there (the random mix, bounded by time). */
  repeat?: boolean
  /** Keeps every n-th answer for checking (default VERIFY_EVERY). */
  sampleEvery?: number
}

function parseJson (body: string): unknown {
  try {
    return JSON.parse(body)
  } catch {
    return undefined
  }
}

function pageProblem (body: string, expect: PageExpectation): string | undefined {
  const parsed = parseJson(body) as { data?: unknown, pagination?: Record<string, unknown> } | undefined
  if (parsed === undefined) return `body is not JSON: ${body.slice(0, 80)}`
  const { data, pagination } = parsed
  if (!Array.isArray(data) || pagination === undefined) return `not a page: ${body.slice(0, 80)}`
  // Under writes the total grows while the row runs: any total the table had meanwhile is exact.
  const stated = pagination.total
  const total = expect.totalUpTo !== undefined && typeof stated === 'number' && stated >= expect.total && stated <= expect.totalUpTo ? stated : expect.total
  const want = { page: expect.page, limit: expect.limit, total, totalPages: Math.ceil(total / expect.limit) }
  for (const [key, value] of Object.entries(want)) {
    if (pagination[key] !== value) return `pagination.${key} is ${String(pagination[key])}, expected ${value}`
  }
  const ids = (data as Item[]).map((item) => Number(item.id))
  if (ids.join(',') !== expect.ids.join(',')) return `ids ${ids.slice(0, 3).join(',')}… are not the expected ${expect.ids.slice(0, 3).join(',')}… (${ids.length} of ${expect.ids.length})`
  return expect.items?.(data as Item[])
}

function sampled (verify: (body: string) => string | undefined, problems: string[]): (body: string) => boolean {
  let seen = 0
  return (body) => {
    if (seen++ % VERIFY_EVERY !== 0) return true
    const problem = verify(body)
    if (problem !== undefined && problems.length < 3) problems.push(`sampled body: ${problem}`)
    return problem === undefined
  }
}

function positiveInteger (name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new BenchError(`--${name} must be a positive whole number`)
  return Number(value)
}

interface Child {
  name: Target
  process: ChildProcess
  base: string
  log: string
  /** The liveness route probed through every row: /health, or what the server has instead (Platformatic's /status). */
  health: string
}

// Everything that must not outlive the benchmark, torn down by cleanup() on success, error or signal.
const children: Child[] = []
let idp: FastifyInstance | undefined
let current: CannonInstance | undefined
let stopping = false

const running = (child: Child): boolean => child.process.exitCode === null && child.process.signalCode === null

function logTail (child: Child): string {
  try {
    return readFileSync(child.log, 'utf8').trim().split('\n').slice(-15).join('\n')
  } catch {
    return ''
  }
}

function logSize (child: Child): number {
  try {
    return statSync(child.log).size
  } catch {
    return 0
  }
}

/**
 * The lines of level error or fatal (pino's 50 and 60), and load shedding's summaries, a server logged after byte `from`.
 * Read a mebibyte at a time: at LOG_LEVEL=info a row writes a line per request, tens of megabytes.
 */
function errorLines (child: Child, from: number): string[] {
  const found: string[] = []
  let fd: number
  try {
    fd = openSync(child.log, 'r')
  } catch {
    return found
  }
  try {
    const chunk = Buffer.alloc(1 << 20)
    let position = from
    let partial = ''
    for (;;) {
      const read = readSync(fd, chunk, 0, chunk.length, position)
      if (read === 0) break
      position += read
      const lines = (partial + chunk.toString('utf8', 0, read)).split('\n')
      partial = lines.pop() ?? ''
      for (const line of lines) if (/"level":(50|60)\b|"shed":\d/.test(line)) found.push(line)
    }
    if (/"level":(50|60)\b|"shed":\d/.test(partial)) found.push(partial)
  } finally {
    closeSync(fd)
  }
  return found
}

async function cleanup (): Promise<void> {
  current?.stop()
  await Promise.all(children.map(async (child) => {
    if (!running(child)) return
    const exited = new Promise((resolve) => child.process.once('exit', resolve))
    child.process.kill('SIGTERM')
    await Promise.race([exited, sleep(5000)])
    if (running(child)) child.process.kill('SIGKILL')
  }))
  await idp?.close()
  idp = undefined
}

// Last resort when the process exits without cleanup() (an uncaught error, process.exit elsewhere).
process.on('exit', () => { for (const child of children) if (running(child)) child.process.kill('SIGKILL') })
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    stopping = true
    process.stderr.write(`bench: ${signal}, stopping\n`)
    cleanup().finally(() => process.exit(130)).catch(() => {})
  })
}

/**
 * Compiles the servers as the image runs them (`npm run build`, then plain `node dist/...`): under the
 * tsx loader the service held some 75 MB more at rest (a loader thread and its transforms), which the
 * memory bound would charge to the service.
 */
function buildServers (): void {
  const build = spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] })
  if (build.status !== 0) throw new BenchError(`npm run build failed (exit ${String(build.status ?? build.signal)})`)
}

interface ChildOptions {
  /** Working directory (default: the project root). */
  cwd?: string
  nodeArgs?: readonly string[]
  /** See Child.health (default /health). */
  health?: string
}

/**
 * Starts one server as a child process on this node, listening on a free port of 127.0.0.1 (PORT, HOST), and
 * waits until `ready` answers 200. `script` is a compiled server's path under dist/ (see buildServers), or
 * the absolute path of one that is not built here (the Platformatic peer's bench/platformatic/serve.mjs).
 */
async function startChild (name: Target, script: string, env: NodeJS.ProcessEnv, readyPath: string, options: ChildOptions = {}): Promise<Child> {
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const log = join(RESULTS_DIR, `${name}.log`)
  const fd = openSync(log, 'w')
  const entry = isAbsolute(script) ? script : join(ROOT, 'dist', script)
  const child: Child = {
    name,
    base,
    log,
    health: options.health ?? '/health',
    process: spawn(process.execPath, [...(options.nodeArgs ?? []), entry], { cwd: options.cwd ?? ROOT, env: { ...env, PORT: String(port), HOST: '127.0.0.1' }, stdio: ['ignore', fd, fd] })
  }
  closeSync(fd)
  children.push(child)
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    if (!running(child)) throw new BenchError(`the ${name} server exited during start-up (${log}):\n${logTail(child)}`)
    try {
      const response = await fetch(base + readyPath, { signal: AbortSignal.timeout(2000) })
      if (response.ok) return child
    } catch {}
    await sleep(250)
  }
  throw new BenchError(`the ${name} server was not ready after 60 s (${log}):\n${logTail(child)}`)
}

/** Samples VmRSS of a process every RSS_SAMPLE_MS; stop() returns the peak in MB. */
function sampleRss (pid: number | undefined): { stop: () => number } {
  let peakKb = 0
  const read = (): void => {
    try {
      const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
      if (match !== null) peakKb = Math.max(peakKb, Number(match[1]))
    } catch {}
  }
  read()
  const timer = setInterval(read, RSS_SAMPLE_MS)
  return { stop: () => { clearInterval(timer); read(); return peakKb / 1024 } }
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
  const response = await fetch(base + path, { signal: AbortSignal.timeout(30_000) })
  const body = await response.text()
  if (response.status !== 200) return `${path} answered ${response.status}: ${body.slice(0, 80)}`
  const problem = pageProblem(body, expect)
  return problem === undefined ? undefined : `${path}: ${problem}`
}

/** A peer's page, fetched once outside the load and checked with its headers. */
async function checkPeerPage (base: string, path: string, verify: PeerRow['verify']): Promise<string | undefined> {
  const response = await fetch(base + path, { signal: AbortSignal.timeout(30_000) })
  const body = await response.text()
  if (response.status !== 200) return `${path} answered ${response.status}: ${body.slice(0, 80)}`
  const problem = verify(body, Object.fromEntries(response.headers))
  return problem === undefined ? undefined : `${path}: ${problem}`
}

/** The naive reference for a page: total and ids by one plain query each (bench/oracle.ts). */
async function expectPage (oracle: Oracle, where: Where, page: number, limit: number, items?: PageExpectation['items'], orderBy = 'id'): Promise<PageExpectation> {
  const total = await oracle.count(where)
  const ids = await oracle.ids(where, orderBy, limit, (page - 1) * limit)
  return { page, limit, total, ids, items }
}

/** The messages whose content or subject contains `term`, as the search endpoint matches them. */
const searchWhere = (term: string): Where => pageQuery(`/v2/messages/search?q=${encodeURIComponent(term)}`).where

/** The exact answer to a list or search path (bench/paths.ts). */
async function expectPath (oracle: Oracle, path: string): Promise<PageExpectation> {
  const query = pageQuery(path)
  return await expectPage(oracle, query.where, query.page, query.limit, undefined, query.orderBy)
}

/** `sync`: the writers of the delta sync catch-up, subjects of their own so the POST rows still provision theirs. */
interface Tokens {
  hello: string
  post: (target: Target | 'sync') => Promise<string[]>
  /**
   * The Platformatic peer's POST callers: seeded users, each token with the id of its user. The peer has no
   * local users (it cannot provision a new subject), so every body names its author.
   */
  peerPost: (oracle: Oracle) => Promise<Array<{ token: string, authorId: number }>>
}

/** The bodies POST sends, one after another: generated messages, the same every run. */
function postBodies (): string[] {
  const random = createRandom(42)
  // The API takes no null subject: a message without one leaves the member out.
  return Array.from({ length: 1000 }, () => {
    const { subject, ...message } = generateMessage(random)
    return JSON.stringify(subject === null ? message : { ...message, subject })
  })
}

const int = (n: number): string => n.toLocaleString('en-US')

/** The bytes a response puts on the wire as it is and in `encoding` (undici does not decode them). */
async function wireBytes (base: string, path: string, encoding: string): Promise<{ identity: number, encoded: number }> {
  const { request } = await import('undici')
  const size = async (headers: Record<string, string>): Promise<number> => {
    const response = await request(base + path, { headers })
    return (await response.body.arrayBuffer()).byteLength
  }
  return { identity: await size({}), encoded: await size({ 'accept-encoding': encoding }) }
}

interface ChangeEntry { op: string, id: number, message?: Item }
interface ChangesAnswer { data: ChangeEntry[], next: string, hasMore: boolean }

const SYNC_LIMIT = 1000
// Far above the calls any walk here needs (1,001 for 1,000,000 messages at limit 1000): a feed that
// never says hasMore=false stops the walk instead of the benchmark hanging.
const MAX_SYNC_CALLS = 100_000

/**
 * Follows GET /v2/messages/changes as a client does, from `since` (or from the start without it) until an
 * answer says hasMore=false: one call after another with undici `request`, every body parsed with JSON.parse
 * and handed to `visit`. Returns the caught-up token. A status other than 200 or a body that is not an
 * answer is a BenchError.
 */
async function followFeed (base: string, since: string | undefined, limit: number, visit?: (answer: ChangesAnswer) => void): Promise<{ next: string, calls: number, entries: number }> {
  let token = since
  let calls = 0
  let entries = 0
  while (calls < MAX_SYNC_CALLS) {
    const path = `/v2/messages/changes?limit=${limit}${token === undefined ? '' : `&since=${encodeURIComponent(token)}`}`
    const response = await request(base + path, { headersTimeout: 30_000, bodyTimeout: 30_000 })
    const body = await response.body.text()
    calls++
    if (response.statusCode !== 200) throw new BenchError(`changes call ${calls} answered ${response.statusCode}: ${body.slice(0, 80)}`)
    const answer = JSON.parse(body) as ChangesAnswer
    if (!Array.isArray(answer.data) || typeof answer.next !== 'string' || typeof answer.hasMore !== 'boolean') {
      throw new BenchError(`changes call ${calls} is not an answer: ${body.slice(0, 80)}`)
    }
    entries += answer.data.length
    visit?.(answer)
    token = answer.next
    if (!answer.hasMore) return { next: token, calls, entries }
  }
  throw new BenchError(`the change feed still had more after ${MAX_SYNC_CALLS} calls of limit ${limit}`)
}

// A poll that finds nothing: no entry, a token, nothing more. The token differs per answer (it carries when it was issued).
const EMPTY_POLL = /^\{"data":\[\],"next":"[A-Za-z0-9_-]+","hasMore":false\}$/

const COLD_LIMIT = 25
const COLD_SEED = 18
/** A sort of the cold rows: its row key, its name, the query string it adds, its ratio to page 1. */
interface ColdSort { key: string, name: string, query: string, target: number }
const COLD_SORTS: readonly ColdSort[] = [
  { key: 'random-id', name: 'sort=id', query: '', target: 0.25 },
  { key: 'random-created', name: 'sort=createdAt desc', query: '&sort=createdAt&order=desc', target: 0.25 },
  { key: 'random-subject', name: 'sort=subject', query: '&sort=subject', target: 0.1 }
]

/** A random page of `pages` in `sort` each request, in the fixed-seed order, checked against the oracle. */
function randomPageRow (oracle: Oracle, sort: ColdSort, pages: number, maxRequests: number): Row {
  return {
    key: sort.key,
    name: `random page of ${int(pages)}, ${sort.name}, limit ${COLD_LIMIT}`,
    targets: ['service', 'baseline'],
    requests: () => [],
    sequence: {
      paths: shuffled(pages, maxRequests, COLD_SEED).map((page) => `/v2/messages?page=${page}&limit=${COLD_LIMIT}${sort.query}`),
      expect: async (path) => await expectPath(oracle, path)
    },
    reference: { key: 'page1-25', target: sort.target }
  }
}

/**
 * The cold rows: a random page for each sort, and a random rare phrase for search, each request another one
 * (see Sequence), compared with warm page 1 of the same run.
 */
async function coldRows (oracle: Oracle, total: number, wanted: (key: string) => boolean, maxRequests: number): Promise<Row[]> {
  const rows: Row[] = []
  const pages = Math.max(1, Math.ceil(total / COLD_LIMIT))
  for (const sort of COLD_SORTS) {
    if (wanted(sort.key)) rows.push(randomPageRow(oracle, sort, pages, maxRequests))
  }
  if (wanted('random-search')) {
    const phrases = rarePhrases()
    rows.push({
      key: 'random-search',
      name: `search, a random rare phrase of ${int(phrases.length)} each request, page 1`,
      targets: ['service', 'baseline'],
      requests: () => [],
      sequence: {
        paths: shuffled(phrases.length, maxRequests, COLD_SEED).map((n) => `/v2/messages/search?q=${encodeURIComponent(phrases[n - 1]!)}&page=1&limit=${COLD_LIMIT}`),
        expect: async (path) => await expectPath(oracle, path)
      },
      reference: { key: 'page1-25', target: 0.05 }
    })
  }
  return rows
}

const WRITES_PER_SECOND = 20
// The orders a row written meanwhile sorts after every row already there (a new id is higher, its
// created time later, and it is written without a subject: NULL keys come last, by id). A page of the
// rows that were there stays the same page while the writer runs, so it can be checked exactly.
const WRITTEN_SORTS: readonly ColdSort[] = [
  { key: 'writes-id', name: 'sort=id', query: '', target: 0.25 },
  { key: 'writes-created', name: 'sort=createdAt', query: '&sort=createdAt', target: 0.25 },
  { key: 'writes-subject', name: 'sort=subject', query: '&sort=subject', target: 0.1 }
]

/**
 * The cold rows under writes: a random page of the rows already there for each sort, each request
 * another one, while a writer creates WRITES_PER_SECOND messages through the API. Every write makes the
 * page cache and the anchors of the version before out of date, as on a messaging API in use.
 */
function writtenRows (oracle: Oracle, total: number, wanted: (key: string) => boolean, maxRequests: number, token: string): Row[] {
  const rows: Row[] = []
  // Full pages only: a new row could join a last page that is not.
  const pages = Math.max(1, Math.floor(total / COLD_LIMIT))
  const bodies = postBodies().map((body) => {
    const { subject: _subject, ...message } = JSON.parse(body) as Record<string, unknown>
    return JSON.stringify(message)
  })
  for (const sort of WRITTEN_SORTS) {
    if (!wanted(sort.key)) continue
    const row = randomPageRow(oracle, sort, pages, maxRequests)
    let before = 0
    rows.push({
      ...row,
      name: `${row.name}, under ${WRITES_PER_SECOND} writes/s`,
      targets: ['service'],
      prepare: async () => { before = await oracle.count(EVERYTHING) },
      writer: (child) => startWriter(child.base, token, bodies, 1000 / WRITES_PER_SECOND, WRITES_PER_SECOND * 600),
      sequence: {
        ...row.sequence!,
        expect: async (path) => ({ ...await expectPath(oracle, path), total: before, totalUpTo: await oracle.count(EVERYTHING) })
      }
    })
  }
  return rows
}

const MIX_SECONDS = 120
const MIX_PATHS = 200_000
const MIX_AUTHORS = 50
const PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const
const SORTS = ['id', 'createdAt', 'priority', 'subject'] as const

/**
 * The random mix (issue: memory under a load test): MIX_SECONDS of list pages in every sort and order,
 * unfiltered or filtered by priority, author or subject, at a random page of what the filter leaves,
 * and searches for rare phrases and for the seeded words at random pages. Fixed seed, the same for
 * every run; paths repeat as they would in a real load test, so caches fill and are used. Its figure
 * is the service's peak RSS.
 */
async function mixRow (oracle: Oracle): Promise<Row> {
  const random = createRandom(COLD_SEED + 1)
  const pick = <T> (items: readonly T[]): T => items[Math.floor(random() * items.length)]!
  const authors = (await oracle.rows<{ id: string }>(`select id from users order by id limit ${MIX_AUTHORS}`)).map((r) => r.id)
  const totals = new Map<string, number>()
  // Pages of a filter or term: its total from the oracle, read once.
  const pagesOf = async (path: string): Promise<number> => {
    let total = totals.get(path)
    if (total === undefined) {
      total = await oracle.count(pageQuery(path).where)
      totals.set(path, total)
    }
    return Math.max(1, Math.ceil(total / COLD_LIMIT))
  }
  const phrases = rarePhrases()
  const words = Object.keys(SEARCH_WORDS)
  const paths: string[] = []
  for (let i = 0; i < MIX_PATHS; i++) {
    const order = `&sort=${pick(SORTS)}&order=${random() < 0.5 ? 'asc' : 'desc'}&limit=${COLD_LIMIT}`
    const kind = random()
    if (kind < 0.3) {
      paths.push(`/v2/messages/search?q=${encodeURIComponent(pick(phrases))}&page=1&limit=${COLD_LIMIT}`)
    } else if (kind < 0.4) {
      const base = `/v2/messages/search?q=${pick(words)}`
      paths.push(`${base}&page=${1 + Math.floor(random() * await pagesOf(base))}${order}`)
    } else {
      const filter = random()
      const base = filter < 0.4
        ? '/v2/messages?'
        : filter < 0.6
          ? `/v2/messages?priority=${pick(PRIORITIES)}`
          : filter < 0.8 ? `/v2/messages?authorId=${pick(authors)}` : `/v2/messages?subject=${encodeURIComponent(pick(SUBJECTS))}`
      paths.push(`${base}&page=${1 + Math.floor(random() * await pagesOf(base))}${order}`)
    }
  }
  return {
    key: 'mix',
    name: `random mix for ${MIX_SECONDS} s: pages of every sort and filter, rare and common search terms`,
    targets: ['service'],
    requests: () => [],
    duration: MIX_SECONDS,
    sequence: { paths, expect: async (path) => await expectPath(oracle, path), repeat: true, sampleEvery: 500 }
  }
}

async function buildRows (oracle: Oracle, keys: Set<string> | undefined, tokens: Tokens, service: Child, maxRequests: number): Promise<Row[]> {
  const wanted = (key: string): boolean => keys === undefined || keys.has(key)
  const rows: Row[] = []
  if (wanted('health')) {
    rows.push({ key: 'health', name: 'GET /health', targets: DEFAULT_TARGETS, requests: () => [{ method: 'GET', path: '/health' }], verify: (b) => b === '{"ok":true}' ? undefined : `health body ${b.slice(0, 40)}` })
  }
  const total = await oracle.count(EVERYTHING)
  // The list rows also run against the Platformatic peer, asked the same page (bench/peer.ts) and held to the same expectation.
  const listRow = (key: string, name: string, path: string, expect: PageExpectation, targets: readonly Target[]): Row => {
    const peerPath = platformaticPath(path)
    const peerVerify: PeerRow['verify'] = (b, headers) => platformaticPageProblem(b, headers, expect)
    return {
      key,
      name,
      targets: [...targets, 'platformatic'],
      requests: () => [{ method: 'GET', path }],
      verify: (b) => pageProblem(b, expect),
      page: { path, expect },
      // Rows that write (POST, the writers beside the cold rows) grow the table between rows, and a
      // row measured again as another's reference runs after them: it expects the table as it is now.
      prepare: async () => {
        const now = await expectPath(oracle, path)
        expect.total = now.total
        expect.ids = now.ids
      },
      platformatic: { requests: () => [{ method: 'GET', path: peerPath }], verify: peerVerify, page: peerPath }
    }
  }
  for (const limit of [25, 100]) {
    const last = Math.max(1, Math.ceil(total / limit))
    const pages: Array<[string, string, number]> = [['page1', 'page 1', 1], ['middle', 'middle page', Math.ceil(last / 2)], ['last', 'last page', last]]
    for (const [label, text, page] of pages) {
      const key = `${label}-${limit}`
      if (!wanted(key)) continue
      const expect = await expectPage(oracle, EVERYTHING, page, limit)
      rows.push(listRow(key, `list ${text} (${page}), limit ${limit}`, `/v2/messages?page=${page}&limit=${limit}`, expect, page === 1 ? DEFAULT_TARGETS : ['service', 'baseline']))
    }
  }
  // Mobile clients (CONTRACT 12), each measured against page 1 of this run.
  if (wanted('revalidate-25') || wanted('gzip-25') || wanted('cursor-25')) {
    const first = await fetch(`${service.base}/v2/messages?page=1&limit=25`)
    const tag = first.headers.get('etag') ?? ''
    await first.arrayBuffer()
    if (wanted('revalidate-25')) {
      rows.push({
        key: 'revalidate-25',
        name: 'page 1, limit 25, revalidated (If-None-Match → 304)',
        targets: ['service'],
        requests: () => [{ method: 'GET', path: '/v2/messages?page=1&limit=25', headers: { 'if-none-match': tag } }],
        verify: (b) => b === '' ? undefined : `a body on a 304: ${b.slice(0, 40)}`,
        alsoOk: [304],
        reference: { key: 'page1-25', target: 1.2 }
      })
    }
    if (wanted('gzip-25')) {
      const sizes = await wireBytes(service.base, '/v2/messages?page=1&limit=25', 'gzip')
      rows.push({
        key: 'gzip-25',
        name: `page 1, limit 25, Accept-Encoding: gzip (${int(sizes.identity)} → ${int(sizes.encoded)} bytes)`,
        targets: ['service'],
        requests: () => [{ method: 'GET', path: '/v2/messages?page=1&limit=25', headers: { 'accept-encoding': 'gzip' } }],
        reference: { key: 'page1-25', target: 0.8 }
      })
    }
    if (wanted('cursor-25')) {
      const middle = Math.ceil(Math.max(1, Math.ceil(total / 25)) / 2)
      const at = await (await fetch(`${service.base}/v2/messages?page=${middle}&limit=25`)).json() as { pagination: { nextCursor?: string | null } }
      const cursor = at.pagination.nextCursor
      if (typeof cursor !== 'string') throw new BenchError(`page ${middle} has no nextCursor`)
      const ids = await oracle.ids(EVERYTHING, 'id', 25, middle * 25)
      rows.push({
        key: 'cursor-25',
        name: `cursor page after page ${middle}, limit 25`,
        targets: ['service'],
        requests: () => [{ method: 'GET', path: `/v2/messages?limit=25&after=${encodeURIComponent(cursor)}` }],
        verify: (b) => {
          const got = ((parseJson(b) as { data?: Item[] } | undefined)?.data ?? []).map((m) => Number(m.id))
          return got.join(',') === ids.join(',') ? undefined : `ids ${got.slice(0, 3).join(',')}… are not ${ids.slice(0, 3).join(',')}…`
        },
        reference: { key: 'page1-25', target: 0.8 }
      })
    }
  }
  if (wanted('filtered')) {
    const expect = await expectPage(oracle, { text: "priority = 'high'", params: [] }, 1, 25,
      (data) => data.every((m) => m.priority === 'high') ? undefined : 'an item that is not high priority')
    rows.push(listRow('filtered', 'priority=high, page 1, limit 25', '/v2/messages?priority=high&page=1&limit=25', expect, ['service', 'baseline']))
  }
  if (wanted('search')) {
    const expect = await expectPage(oracle, searchWhere(SEARCH_WORD), 1, 25,
      (data) => data.every((m) => `${String(m.content)} ${String(m.subject)}`.toLowerCase().includes(SEARCH_WORD)) ? undefined : `an item without "${SEARCH_WORD}"`)
    const share = total === 0 ? 0 : expect.total / total
    rows.push(listRow('search', `search "${SEARCH_WORD}" (${(share * 100).toFixed(1)}% of rows), page 1`, `/v2/messages/search?q=${SEARCH_WORD}&page=1&limit=25`, expect, ['service', 'baseline']))
  }
  rows.push(...await coldRows(oracle, total, wanted, maxRequests))
  if (wanted('mix')) rows.push(await mixRow(oracle))
  // After every row whose expectations were read before the load: these add rows.
  if (WRITTEN_SORTS.some((sort) => wanted(sort.key))) {
    const [writer] = await tokens.post('sync')
    rows.push(...writtenRows(oracle, total, wanted, maxRequests, writer!))
  }
  if (wanted('hello')) {
    rows.push({
      key: 'hello',
      name: 'GET /v2/hello (RS256)',
      targets: DEFAULT_TARGETS,
      requests: () => [{ method: 'GET', path: '/v2/hello', headers: { authorization: `Bearer ${tokens.hello}` } }],
      verify: (b) => b === '{"message":"Hello, bench-admin@example.com!","role":"Admin"}' ? undefined : `hello body ${b.slice(0, 60)}`
    })
  }
  // Last: they add rows, which would move every page expectation above.
  if (wanted('post') || wanted('post-idempotent')) {
    const bodies = postBodies()
    const perTarget = new Map<Target, string[]>()
    for (const target of ['service', 'baseline'] as const) perTarget.set(target, await tokens.post(target))
    // The ceiling writes nothing and knows no users: the service's callers will do.
    perTarget.set('ceiling', perTarget.get('service')!)
    const verify = (b: string): string | undefined => {
      const item = parseJson(b) as Item | undefined
      return typeof item?.id === 'number' && typeof item.content === 'string' ? undefined : `not a message: ${b.slice(0, 60)}`
    }
    // One POST whose n-th sending carries the token, body and headers `nth(n)` gives.
    const rotatingPost = (path: string, nth: (n: number) => { token: string, body: string, headers?: Record<string, string> }): CannonRequest[] => {
      let sent = 0
      return [{
        method: 'POST',
        path,
        headers: { 'content-type': 'application/json' },
        setupRequest (request) {
          const { token, body, headers } = nth(sent++)
          return { ...request, headers: { ...request.headers, ...headers, authorization: `Bearer ${token}` }, body }
        }
      }]
    }
    // Every request another body and caller; with `keyed`, also a key never sent before (CONTRACT 12).
    const posts = (target: Target, keyed: boolean): CannonRequest[] => {
      const list = perTarget.get(target)!
      const prefix = `${Date.now().toString(36)}-${target}`
      return rotatingPost('/v2/messages', (n) => ({
        token: list[n % list.length]!,
        body: bodies[n % bodies.length]!,
        headers: keyed ? { 'idempotency-key': `${prefix}-${n}` } : undefined
      }))
    }
    if (wanted('post')) {
      const peerCallers = await tokens.peerPost(oracle)
      // The peer's equivalent: the same bodies, each naming the caller's user as its author, answered 200.
      const peerPosts = (): CannonRequest[] => rotatingPost('/messages', (n) => {
        const caller = peerCallers[n % peerCallers.length]!
        return { token: caller.token, body: platformaticPostBody(bodies[n % bodies.length]!, caller.authorId) }
      })
      rows.push({
        key: 'post',
        name: `POST /v2/messages (${POST_SUBJECTS} subjects, RS256)`,
        targets: ['service', 'baseline', 'ceiling', 'platformatic'],
        countsWrites: true,
        requests: (target) => posts(target, false),
        verify,
        platformatic: { requests: peerPosts, verify: platformaticMessageProblem, status: 200 }
      })
    }
    if (wanted('post-idempotent')) {
      rows.push({
        key: 'post-idempotent',
        name: 'POST /v2/messages with a fresh Idempotency-Key each',
        targets: ['service'],
        countsWrites: true,
        requests: (target) => posts(target, true),
        verify,
        reference: { key: 'post', target: 0.8 }
      })
    }
  }
  // Delta sync (CONTRACT 12): a caught-up client polls and finds nothing new. The token must come from
  // the end of a whole walk: the first answers without `since` are the initial copy, not a poll. The walk
  // (some 12 s at 1,000,000 messages) is made just before the row, last of all: a full copy leaves the
  // service larger (see docs/benchmarks.md), which must not be charged to the rows before it.
  if (wanted('sync-poll')) {
    let next = ''
    rows.push({
      key: 'sync-poll',
      name: 'delta sync poll that finds nothing new (caught-up token)',
      targets: ['service'],
      async prepare () {
        process.stdout.write('bench: walking the change feed to its end for a caught-up token\n')
        const walk = await followFeed(service.base, undefined, SYNC_LIMIT)
        process.stdout.write(`bench: caught up after ${int(walk.calls)} calls\n`)
        next = walk.next
      },
      requests: () => [{ method: 'GET', path: `/v2/messages/changes?since=${encodeURIComponent(next)}` }],
      verify: (b) => EMPTY_POLL.test(b) ? undefined : `not an empty poll: ${b.slice(0, 80)}`,
      reference: { key: 'page1-25', target: 0.8 }
    })
  }
  return rows
}

/** Wraps a body check so that it also records the id of every acknowledged (created) message. */
function withAcknowledged (verify: (body: string) => boolean, ids: number[] | undefined): (body: string) => boolean {
  if (ids === undefined) return verify
  return (body) => {
    // A number from the service and the baseline, a string of digits from the Platformatic peer (a bigint).
    const id = (parseJson(body) as Item | undefined)?.id
    if (typeof id === 'number' || (typeof id === 'string' && /^\d+$/.test(id))) ids.push(Number(id))
    return verify(body)
  }
}

/**
 * Zero lost writes: every message acknowledged (201; the Platformatic peer's 200) is in the table, and the rows added exceed the
 * acknowledgements by at most the requests still in flight when the load stopped (one per connection).
 */
async function lostWrites (oracle: Oracle, acknowledged: number[], added: number, connections: number): Promise<string[]> {
  const problems: string[] = []
  const found = await oracle.present(acknowledged)
  if (found !== acknowledged.length) problems.push(`${acknowledged.length - found} of ${acknowledged.length} acknowledged messages are missing`)
  if (added < acknowledged.length || added > acknowledged.length + connections) {
    problems.push(`${acknowledged.length} messages acknowledged but ${added} rows added`)
  }
  return problems
}

/** Writes the oracle cannot see while the service runs (the embedded database), checked once it has stopped. */
export interface DeferredWrites { row: string, acknowledged: number[], added: number, connections: number }

interface RunSettings {
  duration: number
  connections: number
  maxRequests: number
  oracle: Oracle
  deferred: DeferredWrites[]
}

/** The message count as the service states it (the total of a list page), for a database only it can read. */
async function statedTotal (child: Child): Promise<number> {
  const page = await (await fetch(`${child.base}/v2/messages?limit=1`)).json() as { pagination: { total: number } }
  return page.pagination.total
}

// Answers of a cold row checked against the oracle after the row: each is a query of its own there.
const SEQUENCE_SAMPLES = 30

/** A cold row's requests: the next path of the sequence each time, every VERIFY_EVERY-th answer kept for checking. */
function sequenceRequests (sequence: Sequence, samples: Array<[string, string]>): CannonRequest[] {
  let sent = 0
  let answered = 0
  return [{
    method: 'GET',
    setupRequest: (request, context) => {
      const path = sequence.paths[sent++ % sequence.paths.length]!
      context.path = path
      return { ...request, path }
    },
    onResponse: (status, body, context) => {
      if (status === 200 && answered++ % (sequence.sampleEvery ?? VERIFY_EVERY) === 0 && samples.length < SEQUENCE_SAMPLES) samples.push([String(context.path), body])
    }
  }]
}

/** A peer's requests, every VERIFY_EVERY-th 2xx answer checked with its headers (autocannon's verifyBody sees none). */
function peerRequests (peer: PeerRow, problems: string[]): CannonRequest[] {
  let answered = 0
  return peer.requests().map((request) => ({
    ...request,
    onResponse: (status, body, _context, headers) => {
      if (status < 200 || status > 299 || answered++ % VERIFY_EVERY !== 0) return
      const problem = peer.verify(body, headers)
      if (problem !== undefined && problems.length < 3) problems.push(`sampled body: ${problem}`)
    }
  }))
}

/** The page check of a row, before or after its load: the service's shape, or the peer's. */
async function checkRowPage (row: Row, child: Child, peer: PeerRow | undefined): Promise<string | undefined> {
  if (peer !== undefined) return peer.page === undefined ? undefined : await checkPeerPage(child.base, peer.page, peer.verify)
  return row.page === undefined ? undefined : await checkPage(child.base, row.page.path, row.page.expect)
}

async function measure (row: Row, child: Child, settings: RunSettings): Promise<Measurement> {
  const { oracle } = settings
  // The peer answers in a shape of its own, so its rows carry their own requests and checks.
  const peer = child.name === 'platformatic' ? row.platformatic : undefined
  if (child.name === 'platformatic' && peer === undefined) throw new BenchError(`"${row.name}" has no Platformatic equivalent`)
  await row.prepare?.()
  const problems: string[] = []
  const before = await checkRowPage(row, child, peer)
  if (before !== undefined) problems.push(`before the run, ${before}`)
  const count = async (): Promise<number> => oracle.live ? await oracle.count(EVERYTHING) : await statedTotal(child)
  // The ceiling answers a create without writing it: there is nothing to count.
  const countsWrites = row.countsWrites === true && child.name !== 'ceiling'
  const countBefore = countsWrites ? await count() : 0
  const acknowledged: number[] = []
  const samples: Array<[string, string]> = []
  const rss = sampleRss(child.process.pid)
  const probe = probeHealth(child.base + child.health)
  const bodyProblems: string[] = []
  const writer = row.writer?.(child)
  const result = await runCannon({
    url: child.base,
    connections: settings.connections,
    duration: row.duration ?? settings.duration,
    maxOverallRequests: row.sequence === undefined || row.sequence.repeat === true ? settings.maxRequests : Math.min(settings.maxRequests, row.sequence.paths.length),
    timeout: 10,
    requests: peer !== undefined ? peerRequests(peer, bodyProblems) : row.sequence === undefined ? row.requests(child.name) : sequenceRequests(row.sequence, samples),
    verifyBody: withAcknowledged(peer !== undefined || row.verify === undefined ? () => true : sampled(row.verify, bodyProblems), countsWrites ? acknowledged : undefined)
  })
  const written = await writer?.stop()
  const health = await probe.stop()
  const peakRssMb = rss.stop()
  if (written !== undefined) {
    process.stdout.write(`bench: ${row.name} (${child.name}): ${int(written.created)} writes in ${written.seconds.toFixed(1)} s beside it\n`)
    problems.push(...written.problems)
    if (written.created === 0) problems.push('the writer wrote nothing')
  }
  if (!running(child)) throw new BenchError(`the ${child.name} server exited during "${row.name}" (${child.log}):\n${logTail(child)}`)
  problems.push(...bodyProblems)
  if (health.failed > 0) problems.push(`${health.failed} of ${health.count} ${child.health} probes failed`)
  if (row.sequence !== undefined) {
    const wrong: string[] = []
    for (const [path, body] of samples) {
      const problem = pageProblem(body, await row.sequence.expect(path))
      if (problem !== undefined) wrong.push(`${path}: ${problem}`)
    }
    if (wrong.length > 0) problems.push(`${wrong.length} of ${samples.length} sampled answers are wrong; the first, ${wrong[0]!}`)
    if (samples.length === 0 && result.requests.total > 0) problems.push('no answer was sampled')
  }
  const after = await checkRowPage(row, child, peer)
  if (after !== undefined) problems.push(`after the run, ${after}`)
  if (countsWrites) {
    const added = await count() - countBefore
    if (oracle.live) problems.push(...await lostWrites(oracle, acknowledged, added, settings.connections))
    else settings.deferred.push({ row: `${row.name} (${child.name})`, acknowledged, added, connections: settings.connections })
  }
  const errors = result.errors + result.timeouts
  const failing = Object.entries(result.statusCodeStats).filter(([code]) => !code.startsWith('2') && row.alsoOk?.includes(Number(code)) !== true)
  if (failing.length > 0) problems.push(`non-2xx responses: ${failing.map(([code, s]) => `${s.count}× ${code}`).join(', ')}`)
  const otherStatus = peer?.status === undefined ? [] : Object.entries(result.statusCodeStats).filter(([code]) => code.startsWith('2') && Number(code) !== peer.status)
  if (otherStatus.length > 0) problems.push(`answers other than ${peer!.status!}: ${otherStatus.map(([code, s]) => `${s.count}× ${code}`).join(', ')}`)
  if (errors > 0) problems.push(`${result.errors} connection errors (${result.timeouts} timeouts)`)
  if (result.requests.total === 0) problems.push('no request completed within the duration')
  if (result.mismatches > 0 && bodyProblems.length === 0) problems.push(`${result.mismatches} sampled bodies failed the checks`)
  const non2xx = failing.reduce((n, [, s]) => n + s.count, 0)
  // A cold row that runs out of its sequence ends early, inside a second: autocannon's average of whole
  // seconds would round its rate, so it is the requests over the time they took.
  const rps = row.sequence !== undefined && result.duration > 0 ? result.requests.total / result.duration : result.requests.average
  return { requests: result.requests.total, rps, p50: result.latency.p50, p99: result.latency.p99, non2xx, errors, peakRssMb, health, problems }
}

const PROBE_INTERVAL_MS = 50

/**
 * GET `url` (a server's /health), one at a time every PROBE_INTERVAL_MS, while a row runs: how long a liveness probe waits
 * while the service is busy with the row (a load balancer would take an instance out past its timeout).
 */
function probeHealth (url: string): { stop: () => Promise<NonNullable<Measurement['health']>> } {
  const latencies: number[] = []
  let failed = 0
  const state = { stopped: false }
  const loop = (async () => {
    while (!state.stopped) {
      const began = performance.now()
      try {
        const response = await request(url, { headersTimeout: 10_000, bodyTimeout: 10_000 })
        await response.body.text()
        if (response.statusCode !== 200) failed++
      } catch {
        failed++
      }
      latencies.push(performance.now() - began)
      await sleep(PROBE_INTERVAL_MS)
    }
  })()
  return {
    async stop () {
      state.stopped = true
      await loop
      const sorted = latencies.sort((a, b) => a - b)
      const p99 = sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0
      return { count: sorted.length, failed, p99, max: sorted[sorted.length - 1] ?? 0 }
    }
  }
}

const SETTLE_TIMEOUT_MS = 30_000

/**
 * Lets the database fall quiet before the next measurement. When autocannon stops, the naive server's
 * slow queries (seconds each under load) keep running on its connections, and on a small machine they
 * would take CPU from whatever is measured next: they are cancelled, then every other backend of this
 * database is waited for until none is active.
 */
async function settle (oracle: Oracle): Promise<void> {
  // The embedded database has no other session: the service's last query ended with its last answer.
  if (!oracle.live) return
  await oracle.rows(`select pg_cancel_backend(pid) from pg_stat_activity
    where datname = current_database() and application_name = 'bench-baseline' and state = 'active'`)
  const deadline = Date.now() + SETTLE_TIMEOUT_MS
  while (Date.now() < deadline) {
    const [row] = await oracle.rows<{ n: number }>(`select count(*)::int as n from pg_stat_activity
      where datname = current_database() and state = 'active' and pid <> pg_backend_pid()`)
    if (row!.n === 0) return
    await sleep(100)
  }
}

const SYNC_TARGET = 100_000
const CATCH_UP_WRITES = 1000
const CATCH_UP_CONCURRENCY = 10
const CATCH_UP_LIMITS = [100, SYNC_LIMIT]
// Each catch-up walk is a few calls of milliseconds: one is noise, so the same walk is repeated.
const CATCH_UP_RUNS = 5
// The walks of the initial sync differ by some 20 % on this machine from one to the next: the median of three.
const INITIAL_SYNC_RUNS = 3

function median (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** The newest transaction in the change log: the same before and after a walk when nothing was written meanwhile. */
async function newestChange (oracle: Oracle): Promise<string | null> {
  const [row] = await oracle.rows<{ xid: string | null }>('select max(xid)::text as xid from message_changes')
  return row!.xid
}

/**
 * The delta sync section (CONTRACT 12), service only. A syncing client is sequential by nature (each call
 * needs the previous answer's token), so these are walks timed end to end, not autocannon rows.
 * (a) The full initial sync with limit 1000, from no `since` until hasMore=false, INITIAL_SYNC_RUNS times (the
 *     median reported, each walk checked), and the service's peak RSS through them.
 * (b) The catch-up after CATCH_UP_WRITES API writes (made first, not timed): from one caught-up token until an
 *     answer says hasMore=false, at the default limit and at 1000, each from that same token; every created
 *     id must come as an upsert.
 * A failure is recorded as a problem of the section; the rest of the benchmark goes on.
 */
async function measureSync (service: Child, oracle: Oracle, tokens: Tokens): Promise<SyncReport> {
  const report: SyncReport = { catchUp: [], problems: [] }
  const { problems } = report
  try {
    const countBefore = await oracle.count(EVERYTHING)
    const newestBefore = await newestChange(oracle)
    const rss = sampleRss(service.process.pid)
    const walks: Array<{ messages: number, calls: number, seconds: number }> = []
    let walk: Awaited<ReturnType<typeof followFeed>> | undefined
    try {
      for (let run = 0; run < INITIAL_SYNC_RUNS; run++) {
        let upserts = 0
        let deletes = 0
        let lastId = 0
        let outOfOrder = 0
        let mislabelled = 0
        const started = performance.now()
        walk = await followFeed(service.base, undefined, SYNC_LIMIT, (answer) => {
          for (const entry of answer.data) {
            if (entry.op !== 'upsert') {
              deletes++
              continue
            }
            upserts++
            if (entry.id <= lastId) outOfOrder++
            if (entry.message?.id !== entry.id) mislabelled++
            lastId = entry.id
          }
        })
        walks.push({ messages: upserts + deletes, calls: walk.calls, seconds: (performance.now() - started) / 1000 })
        // On a database nobody writes to, the copy is every message once, in id order, and no change follows it.
        if (upserts !== countBefore || deletes > 0 || outOfOrder > 0) {
          problems.push(`initial sync ${run + 1} sent ${upserts} upserts (${outOfOrder} out of id order) and ${deletes} deletes for ${countBefore} messages`)
        }
        if (mislabelled > 0) problems.push(`${mislabelled} upserts of initial sync ${run + 1} carry a message of another id`)
        await settle(oracle)
      }
    } finally {
      const peakRssMb = rss.stop()
      const rates = walks.map((w) => w.messages / w.seconds)
      const middle = walks.find((w) => w.messages / w.seconds === median(rates))
      if (middle !== undefined) report.initial = { limit: SYNC_LIMIT, ...middle, messagesPerSecond: middle.messages / middle.seconds, walks: rates, peakRssMb, target: SYNC_TARGET }
    }
    if (await oracle.count(EVERYTHING) !== countBefore || await newestChange(oracle) !== newestBefore) {
      problems.splice(0, problems.length, 'the database was written during the initial syncs (not by this benchmark): the measurement is disturbed and its exactness not checked')
    }
    await settle(oracle)

    const writers = await tokens.post('sync')
    const bodies = postBodies()
    const created: number[] = []
    const failures: string[] = []
    let sent = 0
    const writesStarted = performance.now()
    await Promise.all(Array.from({ length: CATCH_UP_CONCURRENCY }, async () => {
      while (sent < CATCH_UP_WRITES) {
        const n = sent++
        const response = await request(`${service.base}/v2/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${writers[n % writers.length]!}` },
          body: bodies[n % bodies.length]!,
          headersTimeout: 30_000,
          bodyTimeout: 30_000
        })
        const body = await response.body.text()
        const id = (parseJson(body) as Item | undefined)?.id
        if (response.statusCode === 201 && typeof id === 'number') created.push(id)
        else failures.push(`${response.statusCode} ${body.slice(0, 80)}`)
      }
    }))
    report.writes = { count: created.length, seconds: (performance.now() - writesStarted) / 1000 }
    if (failures.length > 0) problems.push(`${failures.length} of ${CATCH_UP_WRITES} catch-up writes failed; the first: ${failures[0]!}`)
    await settle(oracle)

    for (const limit of CATCH_UP_LIMITS) {
      const times: number[] = []
      let first: { entries: number, calls: number, missing: number } | undefined
      for (let run = 0; run < CATCH_UP_RUNS; run++) {
        const upserted = new Set<number>()
        const began = performance.now()
        const caught = await followFeed(service.base, walk!.next, limit, (answer) => {
          for (const entry of answer.data) if (entry.op === 'upsert') upserted.add(entry.id)
        })
        times.push(performance.now() - began)
        const missing = created.filter((id) => !upserted.has(id)).length
        first ??= { entries: caught.entries, calls: caught.calls, missing }
        if (missing > 0) problems.push(`catch-up with limit ${limit}, walk ${run + 1}: ${missing} of ${created.length} created ids did not come as an upsert by hasMore=false`)
      }
      report.catchUp.push({ limit, ...first!, firstMs: times[0]!, medianMs: median(times), runs: CATCH_UP_RUNS })
    }
  } catch (err) {
    problems.push(err instanceof BenchError ? err.message : (err as Error).stack ?? String(err))
  }
  return report
}

function printSync (sync: SyncReport): void {
  const parts: string[] = []
  const { initial } = sync
  if (initial !== undefined) {
    parts.push(`initial sync ${int(initial.messages)} messages in ${int(initial.calls)} calls, ${initial.seconds.toFixed(2)} s, ` +
      `${int(Math.round(initial.messagesPerSecond))} messages/s, peak RSS ${initial.peakRssMb.toFixed(0)} MB`)
  }
  for (const run of sync.catchUp) parts.push(`catch-up at limit ${run.limit} ${run.calls} calls ${run.firstMs.toFixed(1)} ms`)
  process.stdout.write(`bench: delta sync: ${parts.join('; ')}${sync.problems.length > 0 ? ' FAILED' : ''}\n`)
}

function describeMachine (oracle: Oracle): Machine {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown CPU',
    memoryGb: totalmem() / 1024 ** 3,
    node: process.version,
    postgres: oracle.label,
    os: `${type()} ${release()}`
  }
}

const ROW_KEYS = ['health', 'page1-25', 'middle-25', 'last-25', 'page1-100', 'middle-100', 'last-100', 'revalidate-25', 'gzip-25', 'cursor-25',
  'filtered', 'search', ...COLD_SORTS.map((sort) => sort.key), 'random-search', 'mix', ...WRITTEN_SORTS.map((sort) => sort.key), 'hello', 'post', 'post-idempotent', 'sync', 'sync-poll']
// The embedded database's run (no DATABASE_URL): the rows a first try of `npm start` would exercise.
const EMBEDDED_ROWS = ['health', 'page1-25', 'filtered', 'search', ...COLD_SORTS.map((sort) => sort.key), 'random-search', 'post']

function printRow (row: RowReport): void {
  const parts = TARGETS.flatMap((t) => {
    const m = row.results[t]
    return m === undefined ? [] : [`${t} ${Math.round(m.rps)} req/s p99 ${m.p99} ms${m.problems.length > 0 ? ' FAILED' : ''}`]
  })
  process.stdout.write(`bench: ${row.name}: ${parts.join(', ')}\n`)
}

async function main (args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      duration: { type: 'string' },
      connections: { type: 'string' },
      messages: { type: 'string' },
      'max-requests': { type: 'string' },
      rows: { type: 'string' },
      targets: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) {
    process.stdout.write(USAGE.replace('<row keys>', ROW_KEYS.join(', ')).replace('<embedded rows>', EMBEDDED_ROWS.join(', ')))
    return 0
  }
  const databaseUrl = process.env.DATABASE_URL ?? ''
  // Without DATABASE_URL the service runs as `npm start` does, on the embedded database (see EMBEDDED_DIR).
  const embedded = databaseUrl === ''
  if (!embedded && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new BenchError('DATABASE_URL must point to a PostgreSQL server (postgres://...), or be unset for the embedded database')
  }
  const duration = positiveInteger('duration', values.duration, 8)
  const connections = positiveInteger('connections', values.connections, embedded ? 16 : 50)
  const messages = positiveInteger('messages', values.messages ?? process.env.BENCH_ROWS, embedded ? 100_000 : 1_000_000)
  const maxRequests = positiveInteger('max-requests', values['max-requests'], duration * 60_000)
  const keys = new Set(values.rows?.split(',').map((k) => k.trim()).filter((k) => k !== '') ?? (embedded ? EMBEDDED_ROWS : ROW_KEYS))
  const unknown = [...keys].filter((k) => !ROW_KEYS.includes(k))
  if (unknown.length > 0) throw new BenchError(`unknown row ${unknown.join(', ')}; rows are ${ROW_KEYS.join(', ')}`)
  if (embedded) keys.delete('sync')
  const targets = new Set(values.targets?.split(',').map((k) => k.trim()) ?? DEFAULT_TARGETS)
  const unknownTarget = [...targets].filter((t) => !TARGETS.includes(t as Target))
  if (unknownTarget.length > 0 || !targets.has('service')) throw new BenchError(`--targets takes service and any of baseline, ceiling, platformatic (got ${values.targets ?? ''})`)
  if (targets.has('platformatic')) {
    if (embedded) throw new BenchError('the platformatic peer reads PostgreSQL: set DATABASE_URL')
    if (!existsSync(PEER_ENTRY_INSTALLED)) throw new BenchError('the platformatic peer is not installed: run `npm run bench:peer` first (npm ci in bench/platformatic, its own lock file)')
  }
  const outName = values.out ?? (embedded ? 'embedded' : 'latest')
  if (!/^[\w.-]+$/.test(outName)) throw new BenchError('--out takes a file name without a path')
  mkdirSync(RESULTS_DIR, { recursive: true })

  let seeded
  try {
    seeded = await seedDatabase({ url: embedded ? undefined : databaseUrl, dataDir: embedded ? EMBEDDED_DATA_DIR : undefined, messages, users: SEED_USERS, ifEmpty: true })
  } catch (err) {
    throw new BenchError(`cannot prepare the database at ${embedded ? EMBEDDED_DATA_DIR : 'DATABASE_URL'}: ${(err as Error).message}`)
  }
  process.stdout.write(formatSummary(seeded) + '\n')
  const seed = seeded.insertedMessages > 0 ? { messages: seeded.insertedMessages, seconds: seeded.seconds } : undefined
  if (embedded) {
    rmSync(EMBEDDED_ORACLE_DIR, { recursive: true, force: true })
    cpSync(EMBEDDED_DATA_DIR, EMBEDDED_ORACLE_DIR, { recursive: true })
  }

  const audience = process.env.API_AUDIENCE ?? 'backend-3-messages'
  const idpPort = await freePort()
  const issuer = `http://127.0.0.1:${idpPort}`
  idp = await buildDevIdp({ issuer, audience, dataDir: KEYS_DIR })
  await idp.listen({ host: '127.0.0.1', port: idpPort })
  const keysOnDisk = await loadOrCreateKeys(KEYS_DIR)
  const sign = createTokenSigner(keysOnDisk, { issuer, audience })
  const token = async (sub: string, role: string, email?: string, name?: string): Promise<string> => (await sign({ sub, role, email, name })).accessToken
  const runId = Date.now().toString(36)
  const tokens: Tokens = {
    hello: await token('bench-admin', 'Admin', 'bench-admin@example.com', 'Bench Admin'),
    // Half seeded authors, half subjects never seen before (new per run and server), so provisioning is measured.
    post: async (target) => Promise.all(Array.from({ length: POST_SUBJECTS }, async (_, i) => {
      if (i % 2 === 0) {
        const user = seedUser(i + 1)
        return token(user.subjectId, user.role, user.email, user.name)
      }
      return token(`bench-${runId}-${target}-${i}`, 'User')
    })),
    peerPost: async (oracle) => {
      const users = Array.from({ length: POST_SUBJECTS }, (_, i) => seedUser(i + 1))
      const found = await oracle.rows<{ id: string, subject_id: string }>('select id, subject_id from users where subject_id = any($1::text[])', [users.map((u) => u.subjectId)])
      const ids = new Map(found.map((row) => [row.subject_id, Number(row.id)]))
      return Promise.all(users.map(async (user) => {
        const authorId = ids.get(user.subjectId)
        if (authorId === undefined) throw new BenchError(`the seeded user ${user.subjectId} is not in the database`)
        return { token: await token(user.subjectId, user.role, user.email, user.name), authorId }
      }))
    }
  }

  const oracle = embedded ? await pgliteOracle(EMBEDDED_ORACLE_DIR, EMBEDDED_DATA_DIR) : await postgresOracle(databaseUrl)
  const deferred: DeferredWrites[] = []
  try {
    const machine = describeMachine(oracle)
    const serverEnv = { ...process.env, DATABASE_URL: databaseUrl, AUTH_ISSUER: issuer, API_AUDIENCE: audience }
    buildServers()
    // The embedded service runs in EMBEDDED_DIR, where its default ./.data/pglite is the seeded directory.
    const service = await startChild('service', 'src/server.js', { ...serverEnv, RATE_LIMIT_MAX: '0', LOG_LEVEL: 'info' }, '/health/ready', { cwd: embedded ? EMBEDDED_DIR : ROOT, nodeArgs: SERVICE_NODE_ARGS })
    const byTarget: Partial<Record<Target, Child>> = { service }
    // The naive server and the ceiling read PostgreSQL; on the embedded database the service is measured alone.
    if (!embedded && targets.has('baseline')) byTarget.baseline = await startChild('baseline', 'bench/baseline.js', serverEnv, '/health')
    if (!embedded && targets.has('ceiling')) {
      // The ceiling answers the service's own page-1 bodies, read once at start-up.
      const pagesFile = join(RESULTS_DIR, 'ceiling-pages.json')
      const pages: Record<string, unknown> = {}
      for (const limit of [25, 100]) pages[limit] = await (await fetch(`${service.base}/v2/messages?page=1&limit=${limit}`)).json()
      writeFileSync(pagesFile, JSON.stringify(pages))
      byTarget.ceiling = await startChild('ceiling', 'bench/ceiling.js', { ...serverEnv, CEILING_PAGES_FILE: pagesFile, CEILING_JWK: JSON.stringify(keysOnDisk.publicJwk) }, '/health')
    }
    if (targets.has('platformatic')) byTarget.platformatic = await startChild('platformatic', PEER_ENTRY, peerEnv(databaseUrl, issuer, audience), '/status', { cwd: PEER_DIR, health: '/status' })

    const rows = (await buildRows(oracle, keys, tokens, service, maxRequests))
      .map((row) => ({ ...row, targets: row.targets.filter((target) => byTarget[target] !== undefined) }))
    const settings: RunSettings = { duration, connections, maxRequests, oracle, deferred }
    // Unreported warm-up, so the first row does not pay for JIT compilation and pool connections.
    for (const child of Object.values(byTarget)) {
      const page = child.name === 'platformatic' ? platformaticPath('/v2/messages?limit=25') : '/v2/messages?limit=25'
      await runCannon({ url: child.base, connections: 10, duration: 1, maxOverallRequests: 20_000, timeout: 10, requests: [{ method: 'GET', path: child.health }, { method: 'GET', path: page }] })
    }

    const reports: RowReport[] = []
    // The delta sync section comes last, before only the poll row: a full copy leaves the service larger
    // (docs/benchmarks.md), which must not be charged to the rows before it; its catch-up adds messages,
    // which the page rows' expectations would not know of.
    const pollRow = rows.findIndex((row) => row.key === 'sync-poll')
    const syncAt = keys !== undefined && !keys.has('sync') ? -1 : pollRow === -1 ? rows.length : pollRow
    let sync: SyncReport | undefined
    for (const [index, row] of [...rows, undefined].entries()) {
      if (index === syncAt) {
        sync = await measureSync(service, oracle, tokens)
        printSync(sync)
        await settle(oracle)
        await sleep(300)
      }
      if (row === undefined) break
      const report: RowReport = { key: row.key, name: row.name, results: {}, reference: row.reference }
      // The machine's speed drifts over a run (the ceiling's /health differed 1.9× between two runs of
      // one hour): a row compared with another is compared with that row measured again just before it.
      const against = row.reference === undefined ? undefined : rows.find((r) => r.key === row.reference!.key)
      if (report.reference !== undefined && against !== undefined) {
        report.reference = { ...report.reference, measured: await measure(against, service, settings) }
        await settle(oracle)
        await sleep(300)
      }
      for (const target of row.targets) {
        const child = byTarget[target]!
        const logFrom = logSize(child)
        const measured = report.results[target] = await measure(row, child, settings)
        await settle(oracle)
        // Answers that come after the row has stopped listening (a statement timeout, 10 s on) are
        // seen only in the server's log.
        const logged = errorLines(child, logFrom)
        if (logged.length > 0) measured.problems.push(`${logged.length} error or load-shedding lines in the ${target}'s log during the row; the first: ${logged[0]!.slice(0, 300)}`)
        await sleep(300)
      }
      printRow(report)
      reports.push(report)
    }

    const messagesAtEnd = oracle.live ? await oracle.count(EVERYTHING) : await statedTotal(service)
    const databaseBytes = await oracle.bytes()
    if (deferred.length > 0) {
      // The service stops as on a deploy (SIGTERM, its database closed), then its own directory is read.
      await cleanup()
      for (const check of deferred) {
        const written = await pgliteOracle(EMBEDDED_DATA_DIR)
        try {
          const problems = await lostWrites(written, check.acknowledged, check.added, check.connections)
          const measured = reports.find((r) => `${r.name} (service)` === check.row)?.results.service
          measured?.problems.push(...problems.map((p) => `after the service stopped: ${p}`))
        } finally {
          await written.close()
        }
      }
    }
    const report: BenchReport = {
      date: new Date().toISOString(),
      machine,
      messages: messagesAtEnd,
      size: messages,
      seed,
      databaseBytes,
      durationSeconds: duration,
      connections,
      rssLimitMb: embedded ? undefined : RSS_LIMIT_MB,
      rows: reports,
      sync
    }
    const markdown = renderMarkdown(report)
    // The embedded run has results of its own: it is a different database, not a later run of the same one.
    const name = outName
    writeFileSync(join(RESULTS_DIR, `${name}.md`), markdown)
    writeFileSync(join(RESULTS_DIR, `${name}.json`), JSON.stringify(report, null, 2) + '\n')
    writeFileSync(join(RESULTS_DIR, `${name}.svg`), renderSvg(report))
    process.stdout.write('\n' + markdown + `\nWritten to ${join(RESULTS_DIR, `${name}.{md,json,svg}`)}\n`)
    const failedRow = reports.some((r) => (r.results.service?.problems.length ?? 0) > 0 || (r.results.service?.peakRssMb ?? 0) > (report.rssLimitMb ?? Infinity))
    // As for the rows, a target is reported, not enforced: wrong answers and RSS over the limit fail the run.
    const failedSync = sync !== undefined && (sync.problems.length > 0 || (sync.initial?.peakRssMb ?? 0) > RSS_LIMIT_MB)
    return failedRow || failedSync ? 1 : 0
  } finally {
    await oracle.close()
  }
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
