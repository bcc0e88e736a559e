/**
 * The servers the benchmark measures, each a child process on a free loopback port (the service, the
 * naive baseline, the ceiling, the Platformatic peer), and the loopback identity provider they trust.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { closeSync, openSync, writeFileSync } from 'node:fs'
import { isAbsolute, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { buildDevIdp, loadOrCreateKeys, type DevIdpKeys } from '../../src/dev-idp/app.js'
import { freePort } from '../../scripts/free-port.js'
import { SERVICE_NODE_ARGS } from '../../scripts/service-args.js'
import { stopCannon } from '../load/autocannon.js'
import { BenchError } from '../run/bench-error.js'
import { raisedLimitCommand, stopFleets } from '../live/fleet.js'
import { EMBEDDED_DIR, KEYS_DIR, PEER_DIR, PEER_ENTRY, RESULTS_DIR, ROOT } from '../run/locations.js'
import type { Target } from '../report/bench-report.js'
import { logTail } from './server-logs.js'

/**
 * A server the rows are measured against: one the benchmark started (a Child), or a deployment it did not
 * start (`--target`), which has no process here to sample and no log to read.
 */
export interface Server {
  name: Target
  base: string
  /** The liveness route probed through every row: /health, or what the server has instead (Platformatic's /status). */
  health: string
  process?: ChildProcess
  log?: string
}

export interface Child extends Server {
  process: ChildProcess
  log: string
}

/** The servers of a run; the service always runs. */
export type Servers = Partial<Record<Target, Child>> & { service: Child }
/** The servers the rows are measured against: the children of a run, or the target alone. */
export type MeasuredServers = Partial<Record<Target, Server>> & { service: Server }

// Everything that must not outlive the benchmark, torn down by cleanup() on success, error or signal.
const children: Child[] = []
let idp: FastifyInstance | undefined
let stopping = false

/** Whether a server still runs; a target's process is not ours to watch, so it always counts as running. */
export const running = (server: Server): boolean => server.process === undefined || (server.process.exitCode === null && server.process.signalCode === null)

/** Whether a signal is stopping the benchmark: failures from then on are the interruption itself. */
export const isStopping = (): boolean => stopping

export async function cleanup (): Promise<void> {
  stopCannon()
  stopFleets()
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

/** On SIGINT or SIGTERM: cleanup(), then exit 130. */
export function handleSignals (): void {
  // Last resort when the process exits without cleanup() (an uncaught error, process.exit elsewhere).
  process.on('exit', () => {
    stopFleets()
    for (const child of children) if (running(child)) child.process.kill('SIGKILL')
  })
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      stopping = true
      process.stderr.write(`bench: ${signal}, stopping\n`)
      cleanup().finally(() => process.exit(130)).catch(() => {})
    })
  }
}

export interface Identity { issuer: string, audience: string, keys: DevIdpKeys }

/** The development identity provider on a free loopback port, and the keys on disk it signs with. */
export async function startIdentityProvider (audience: string): Promise<Identity> {
  const idpPort = await freePort()
  const issuer = `http://127.0.0.1:${idpPort}`
  idp = await buildDevIdp({ issuer, audience, dataDir: KEYS_DIR })
  await idp.listen({ host: '127.0.0.1', port: idpPort })
  return { issuer, audience, keys: await loadOrCreateKeys(KEYS_DIR) }
}

/**
 * The peer's environment, read by the placeholders of bench/platformatic/platformatic.json: the same
 * database, issuer and audience as the service. Unlike the baseline's, its queries left running when a row
 * stops are waited for, not cancelled (settle()): it logs a cancelled query as an error, which the row's
 * log check would charge to it.
 */
function peerEnv (databaseUrl: string, issuer: string, audience: string): NodeJS.ProcessEnv {
  return { ...process.env, PLT_DATABASE_URL: databaseUrl, PLT_AUTH_ISSUER: issuer, PLT_API_AUDIENCE: audience }
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
  /** The log's name in bench/results/ (default: the target's). */
  logName?: string
  /** Starts node through bash with the soft limit of open files raised to the hard one (the live rows' 10,000 connections). */
  raiseFileLimit?: boolean
}

/**
 * Starts one server as a child process on this node, listening on a free port of 127.0.0.1 (PORT, HOST), and
 * waits until `ready` answers 200. `script` is a compiled server's path under dist/ (see buildServers), or
 * the absolute path of one that is not built here (the Platformatic peer's bench/platformatic/serve.mjs).
 */
async function startChild (name: Target, script: string, env: NodeJS.ProcessEnv, readyPath: string, options: ChildOptions = {}): Promise<Child> {
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const log = join(RESULTS_DIR, `${options.logName ?? name}.log`)
  const fd = openSync(log, 'w')
  const entry = isAbsolute(script) ? script : join(ROOT, 'dist', script)
  const nodeArgs = [...(options.nodeArgs ?? []), entry]
  // exec keeps the pid: the process watched (RSS, CPU) is node itself, not the shell.
  const { command, args } = options.raiseFileLimit === true ? raisedLimitCommand(nodeArgs) : { command: process.execPath, args: nodeArgs }
  const child: Child = {
    name,
    base,
    log,
    health: options.health ?? '/health',
    process: spawn(command, args, { cwd: options.cwd ?? ROOT, env: { ...env, PORT: String(port), HOST: '127.0.0.1' }, stdio: ['ignore', fd, fd] })
  }
  closeSync(fd)
  children.push(child)
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    if (!running(child)) throw new BenchError(`the ${name} server exited during start-up (${log}):\n${logTail(child.log)}`)
    try {
      const response = await fetch(base + readyPath, { signal: AbortSignal.timeout(2000) })
      if (response.ok) return child
    } catch {}
    await sleep(250)
  }
  throw new BenchError(`the ${name} server was not ready after 60 s (${log}):\n${logTail(child.log)}`)
}

/** The ceiling answers the service's own page-1 bodies, read once at start-up. */
async function startCeiling (service: Child, env: NodeJS.ProcessEnv, keys: DevIdpKeys): Promise<Child> {
  const pagesFile = join(RESULTS_DIR, 'ceiling-pages.json')
  const pages: Record<string, unknown> = {}
  for (const limit of [25, 100]) pages[limit] = await (await fetch(`${service.base}/v2/messages?page=1&limit=${limit}`)).json()
  writeFileSync(pagesFile, JSON.stringify(pages))
  return await startChild('ceiling', 'bench/servers/raw-ceiling.js', { ...env, CEILING_PAGES_FILE: pagesFile, CEILING_JWK: JSON.stringify(keys.publicJwk) }, '/health')
}

export interface ServerPlan {
  databaseUrl: string
  embedded: boolean
  targets: ReadonlySet<string>
  identity: Identity
}

const serverEnv = ({ databaseUrl, identity }: ServerPlan): NodeJS.ProcessEnv =>
  ({ ...process.env, DATABASE_URL: databaseUrl, AUTH_ISSUER: identity.issuer, API_AUDIENCE: identity.audience })

// The live rows (bench/live/) hold up to 10,000 clients, all from 127.0.0.1, on one service.
const LIVE_ENV = { LIVE_MAX_CONNECTIONS: '12000', LIVE_MAX_PER_CLIENT: '20000' }
// The load generator at 127.0.0.1 stands for a proxy: a cold row's request carries the address of the
// client it stands for in X-Forwarded-For (../run/measure-row.ts). Clients bound to other loopback
// addresses (the search flood's) are clients themselves, as are requests without the header.
const CLIENTS_ENV = { TRUST_PROXY: '127.0.0.1' }

/**
 * Starts the service on the plan's database, with `env` over its settings (the write path's live-off
 * service); `logName` keeps a second service's log apart from the first's.
 */
export async function startService (plan: ServerPlan, env: NodeJS.ProcessEnv = {}, logName?: string): Promise<Child> {
  // BENCH_SERVICE_NODE_ARGS: flags for a diagnosis only (`--cpu-prof --cpu-prof-dir=/tmp/prof`), which NODE_OPTIONS refuses.
  const extra = process.env.BENCH_SERVICE_NODE_ARGS?.split(' ').filter((a) => a !== '') ?? []
  // The embedded service runs in EMBEDDED_DIR, where its default ./.data/pglite is the seeded directory.
  return await startChild('service', 'src/server.js', { ...serverEnv(plan), RATE_LIMIT_MAX: '0', LOG_LEVEL: 'info', ...LIVE_ENV, ...CLIENTS_ENV, ...env }, '/health/ready',
    { cwd: plan.embedded ? EMBEDDED_DIR : ROOT, nodeArgs: [...SERVICE_NODE_ARGS, ...extra], logName, raiseFileLimit: true })
}

/** Stops one server as cleanup() does (SIGTERM, then SIGKILL after 5 s). */
export async function stopChild (child: Child): Promise<void> {
  if (running(child)) {
    const exited = new Promise((resolve) => child.process.once('exit', resolve))
    child.process.kill('SIGTERM')
    await Promise.race([exited, sleep(5000)])
    if (running(child)) child.process.kill('SIGKILL')
  }
  children.splice(children.indexOf(child), 1)
}

/** Builds the servers, then starts the service and the other targets of the run. */
export async function startServers (plan: ServerPlan): Promise<Servers> {
  const { databaseUrl, embedded, targets, identity } = plan
  buildServers()
  const service = await startService(plan)
  const servers: Servers = { service }
  // The naive server and the ceiling read PostgreSQL; on the embedded database the service is measured alone.
  if (!embedded && targets.has('baseline')) servers.baseline = await startChild('baseline', 'bench/servers/naive-baseline.js', serverEnv(plan), '/health')
  if (!embedded && targets.has('ceiling')) servers.ceiling = await startCeiling(service, serverEnv(plan), identity.keys)
  if (targets.has('platformatic')) {
    servers.platformatic = await startChild('platformatic', PEER_ENTRY, peerEnv(databaseUrl, identity.issuer, identity.audience), '/status', { cwd: PEER_DIR, health: '/status' })
  }
  return servers
}
