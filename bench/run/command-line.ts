/** The command line of `npm run bench`: its options, their defaults and checks, and the help. */
import { existsSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { BenchError } from './bench-error.js'
import { PEER_ENTRY_INSTALLED } from './locations.js'
import { DEFAULT_TARGETS, TARGETS, type Target } from '../report/bench-report.js'
import { EMBEDDED_LIVE_KEYS, LIVE_KEYS, POSTGRES_ONLY_LIVE_KEYS } from '../live/rows.js'
import { EMBEDDED_ROWS, ROW_KEYS } from '../rows/index.js'

export const USAGE = `Usage: [DATABASE_URL=postgres://...] npm run bench -- [options]

Seeds the database when it holds fewer than --messages messages, starts the API server and, on PostgreSQL,
the naive baseline (bench/servers/naive-baseline.ts) and the ceiling (bench/servers/raw-ceiling.ts) as child processes on free loopback
ports, and drives each row against each of them with autocannon, probing GET /health throughout. With
--targets naming platformatic, Platformatic DB (bench/platformatic/, installed by \`npm run bench:peer\`) is
measured too, on the list, filtered, search and POST rows. On
PostgreSQL the delta sync section follows (row key \`sync\`, service only, one sequential client): the full
initial sync and the catch-up after 1,000 API writes. The live delivery section comes last (bench/live/,
service only): clients held open by long-poll and SSE at 100, 1,000 and 10,000 connections by a load client
of its own process, writes half through the API and half by SQL, the saturation, the memory per idle
connection and the write path with live delivery on and off (keys live-*; --live runs them alone).

Without DATABASE_URL the service runs on the embedded database, as \`npm start\` does, in a directory of the
benchmark's own (.data/bench/), and alone; the default rows are then <embedded rows>.

Writes bench/results/latest.{md,json,svg} (embedded: bench/results/embedded.{md,json,svg}; with --live,
live.* and embedded-live.*).

With --target <url>, the same rows run against a deployment the benchmark did not start (a load balancer in
front of several instances, say), and nothing is started or seeded: the rows that need the benchmark's own
database or service process are skipped, and so are the peers; answers are checked for their shape; the rows
that write run only with --allow-writes, and those that call as a user only with tokens (docs/performance.md, "Benchmarking your own deployment").
Writes bench/results/target.{md,json,svg}.

Options:
  --messages <n>      messages the database must hold (default BENCH_ROWS, else 1000000; embedded 100000)
  --duration <s>      seconds per row and server (default 8)
  --connections <n>   concurrent connections (default 50; embedded 16)
  --max-requests <n>  request cap per row and server (default 60000 per second of --duration)
  --rows <a,b,...>    run only these rows (keys: <row keys>)
  --live              run only the live delivery rows (embedded: <embedded live rows>); with --rows, only
                      the live rows among them. --duration is then the seconds each live row writes.
  --targets <a,b>     the servers to measure (default service,baseline,ceiling; service is required;
                      platformatic: the Platformatic DB peer, on PostgreSQL, after npm run bench:peer)
  --out <name>        write bench/results/<name>.{md,json,svg} (default latest; embedded: embedded; target: target)
  --target <url>      measure the deployment at <url> (http or https) instead of servers of the benchmark's own
  --token-file <path> with --target: bearer tokens, one a line; the first calls GET /v2/hello (needs Admin)
  --idp <url>         with --target: the deployment's development identity provider, which mints the tokens
                      (POST <url>/token); default none
  --allow-writes      with --target: run the rows that create messages too
  -h, --help          show this help
`

/** A deployment the benchmark did not start, and what it may do there. */
export interface TargetPlan {
  /** The base address, without a trailing slash. */
  url: string
  tokenFile?: string
  idp?: string
  allowWrites: boolean
}

export interface BenchOptions {
  /** PostgreSQL, or '' for the embedded database. */
  databaseUrl: string
  embedded: boolean
  duration: number
  connections: number
  messages: number
  maxRequests: number
  /** The row keys to run (and `sync`, the delta sync section). */
  keys: Set<string>
  targets: Set<string>
  /** The name of the result files in bench/results/. */
  outName: string
  /** --target: the rows run against this deployment, and no server is started. */
  target?: TargetPlan
}

export function helpText (): string {
  return USAGE.replace('<row keys>', ROW_KEYS.join(', ')).replace('<embedded rows>', EMBEDDED_ROWS.join(', ')).replace('<embedded live rows>', EMBEDDED_LIVE_KEYS.join(', '))
}

/** The line a failure prints: the message alone for the benchmark's own errors and bad options (then the usage), else the stack. */
export function failureText (err: unknown): string {
  const usage = (err as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS') === true
  return `bench: ${err instanceof BenchError || usage ? (err as Error).message : (err as Error).stack ?? String(err)}\n${usage ? `\n${USAGE}` : ''}`
}

function positiveInteger (name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new BenchError(`--${name} must be a positive whole number`)
  return Number(value)
}

function rowKeys (rows: string | undefined, embedded: boolean, live: boolean): Set<string> {
  const all = live ? (embedded ? EMBEDDED_LIVE_KEYS : LIVE_KEYS) : embedded ? EMBEDDED_ROWS : ROW_KEYS
  const keys = new Set(rows?.split(',').map((k) => k.trim()).filter((k) => k !== '') ?? all)
  const unknown = [...keys].filter((k) => !ROW_KEYS.includes(k))
  if (unknown.length > 0) throw new BenchError(`unknown row ${unknown.join(', ')}; rows are ${ROW_KEYS.join(', ')}`)
  if (live) for (const key of keys) if (!LIVE_KEYS.includes(key)) keys.delete(key)
  if (embedded) for (const key of ['sync', ...POSTGRES_ONLY_LIVE_KEYS]) keys.delete(key)
  return keys
}

/** A target's rows: those asked for, else every row but the live delivery section's, which needs the service as a process here. */
function targetKeys (rows: string | undefined): Set<string> {
  const keys = rowKeys(rows, false, false)
  if (rows === undefined) for (const key of LIVE_KEYS) keys.delete(key)
  return keys
}

function targetSet (list: string | undefined, embedded: boolean): Set<string> {
  const targets = new Set(list?.split(',').map((k) => k.trim()) ?? DEFAULT_TARGETS)
  const unknownTarget = [...targets].filter((t) => !TARGETS.includes(t as Target))
  if (unknownTarget.length > 0 || !targets.has('service')) throw new BenchError(`--targets takes service and any of baseline, ceiling, platformatic (got ${list ?? ''})`)
  if (targets.has('platformatic')) {
    if (embedded) throw new BenchError('the platformatic peer reads PostgreSQL: set DATABASE_URL')
    if (!existsSync(PEER_ENTRY_INSTALLED)) throw new BenchError('the platformatic peer is not installed: run `npm run bench:peer` first (npm ci in bench/platformatic, its own lock file)')
  }
  return targets
}

/** An http(s) base address from the command line, without its trailing slash. */
function baseUrl (name: string, value: string): string {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new BenchError(`--${name} must be an http or https address (got ${value})`)
  }
  if (!/^https?:$/.test(url.protocol) || url.search !== '' || url.hash !== '') throw new BenchError(`--${name} must be an http or https address without a query (got ${value})`)
  return url.href.replace(/\/+$/, '')
}

type Values = Record<string, string | boolean | undefined>

/** The target options, checked; undefined without --target, where the options that go with it are refused. */
function targetPlan (values: Values): TargetPlan | undefined {
  const withTarget = ['token-file', 'idp', 'allow-writes'].filter((name) => values[name] !== undefined)
  if (typeof values.target !== 'string') {
    if (withTarget.length > 0) throw new BenchError(`--${withTarget[0]!} goes with --target`)
    return undefined
  }
  // A target is the service; nothing is seeded or started beside it.
  const refused = ['targets', 'live', 'messages'].filter((name) => values[name] !== undefined)
  if (refused.length > 0) throw new BenchError(`--${refused[0]!} does not go with --target: the target is the service alone, and nothing is seeded there`)
  if (values['token-file'] !== undefined && values.idp !== undefined) throw new BenchError('--token-file and --idp are two sources of tokens: give one')
  return {
    url: baseUrl('target', values.target),
    tokenFile: typeof values['token-file'] === 'string' ? values['token-file'] : undefined,
    idp: typeof values.idp === 'string' ? baseUrl('idp', values.idp) : undefined,
    allowWrites: values['allow-writes'] === true
  }
}

/** The options of `args` and the environment, checked; undefined when the help was asked for. */
export function parseOptions (args: string[]): BenchOptions | undefined {
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
      live: { type: 'boolean' },
      target: { type: 'string' },
      'token-file': { type: 'string' },
      idp: { type: 'string' },
      'allow-writes': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) return undefined
  const target = targetPlan(values)
  if (target !== undefined) {
    const duration = positiveInteger('duration', values.duration, 8)
    const outName = values.out ?? 'target'
    if (!/^[\w.-]+$/.test(outName)) throw new BenchError('--out takes a file name without a path')
    return {
      databaseUrl: '',
      embedded: false,
      duration,
      connections: positiveInteger('connections', values.connections, 50),
      messages: 0,
      maxRequests: positiveInteger('max-requests', values['max-requests'], duration * 60_000),
      keys: targetKeys(values.rows),
      targets: new Set(['service']),
      outName,
      target
    }
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
  const live = values.live === true
  const keys = rowKeys(values.rows, embedded, live)
  // The live rows alone are a measurement of their own, which must not overwrite the whole run's results.
  const targets = live ? new Set(['service']) : targetSet(values.targets, embedded)
  const outName = values.out ?? `${embedded ? 'embedded' : live ? 'live' : 'latest'}${embedded && live ? '-live' : ''}`
  if (!/^[\w.-]+$/.test(outName)) throw new BenchError('--out takes a file name without a path')
  return { databaseUrl, embedded, duration, connections, messages, maxRequests, keys, targets, outName }
}
