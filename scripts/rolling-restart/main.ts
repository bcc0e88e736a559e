import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { seedDatabase } from '../seed.js'
import { haproxyVersion } from './haproxy.js'
import type { Instance } from './instance.js'
import { initialCopy, startLiveClients } from './live-clients.js'
import { startLoad, type LoadResult, type Phase } from './load.js'
import { renderReport, verdicts, type Restart } from './report.js'
import { CheckError, ROOT, describeExit, killStarted, nodeVersion, positive, startStack, type Stack, type Started } from './stack.js'
import { verify } from './verify.js'

const USAGE = `Usage: scripts/check-rolling-restart.sh [options]   (or: node --import tsx scripts/rolling-restart/main.ts)

Zero downtime, checked on real processes: a database of its own on the local PostgreSQL server, three
compiled API instances (dist/src/server.js) on loopback, and HAProxy running the repository's
deploy/haproxy.cfg with only the addresses set (LB_BIND, API_1..API_3). Under a steady mixed load (list
pages, search, by-id reads, POSTs with an Idempotency-Key that the client retries up to three times on a
network error or a 5xx), each instance in turn is stopped with SIGTERM and replaced, then one is killed
with SIGKILL and started again. Throughout, live clients of GET /v2/messages/changes (Server-Sent Events
that reopen with Last-Event-ID, and long-polls with wait=20) keep a copy of the messages: every message
the load creates must reach every one of them, and each copy must equal the table at the end. Prints
the results as a table; exits 1 unless every check holds.

Options:
  --node <path>     node binary the instances run on (default: this process's)
  --config <path>   HAProxy configuration (default deploy/haproxy.cfg)
  --messages <n>    messages to seed (default 20000)
  --rate <n>        requests started per second (default 100)
  --live <n>        live clients of each kind, SSE and long-poll (default 20)
  --out <path>      also write the table to this file
  --keep-logs       keep the instances' and HAProxy's logs (always kept when the check fails)
  -h, --help        show this help

Environment: ADMIN_DATABASE_URL, a PostgreSQL server's maintenance database where the check may create
and drop its own (default postgres://postgres@127.0.0.1:5432/postgres).
`

const INSTANCES = 3
const WORKERS = 16
const START_TIMEOUT_MS = 60_000
// The instances' SHUTDOWN_GRACE_MS is the default 10 s; an orchestrator waits longer before SIGKILL.
const STOP_TIMEOUT_MS = 15_000
const MARK_TIMEOUT_MS = 20_000
const WARMUP_MS = 3000
const REST_MS = 15_000
const CRASH_DOWNTIME_MS = 2000
// After the load stops, how long the live clients have to hold exactly the table: well past one
// long-poll's wait (20 s), though a live delivery takes well under a second.
const LIVE_SETTLE_MS = 30_000
// Everything, seeding included, is over well within this; past it the check stops and fails.
const WATCHDOG_MS = 6 * 60_000

const say = (line: string): boolean => process.stderr.write(`rolling-restart: ${line}\n`)

/** A database of the check's own on the server, dropped by the returned function. */
async function ownDatabase (adminUrl: string): Promise<{ url: string, drop: () => Promise<void> }> {
  const name = `rolling_restart_${Date.now()}_${process.pid}`
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe(`create database "${name}"`)
  } catch (err) {
    await admin.end()
    throw new CheckError(`cannot create a database at ADMIN_DATABASE_URL: ${(err as Error).message}`)
  }
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: async () => {
      await admin.unsafe(`drop database if exists "${name}" with (force)`)
      await admin.end()
    }
  }
}

async function main (args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      node: { type: 'string' },
      config: { type: 'string' },
      messages: { type: 'string' },
      rate: { type: 'string' },
      live: { type: 'string' },
      out: { type: 'string' },
      'keep-logs': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) {
    process.stdout.write(USAGE)
    return 0
  }
  const node = values.node ?? process.execPath
  const config = values.config ?? join(ROOT, 'deploy/haproxy.cfg')
  const messages = positive('messages', values.messages, 20_000)
  const rate = positive('rate', values.rate, 100)
  const liveClients = positive('live', values.live, 20)
  const haproxy = haproxyVersion()
  if (haproxy === null) throw new CheckError('HAProxy is not installed (Debian: apt-get install haproxy)')

  const work = mkdtempSync(join(tmpdir(), 'rolling-restart-'))
  const instances: Instance[] = []
  const started: Started = { instances }
  let database: { url: string, drop: () => Promise<void> } | undefined
  let load: { stop: () => Promise<LoadResult> } | undefined
  let live: ReturnType<typeof startLiveClients> | undefined
  let keep = values['keep-logs'] === true
  const watchdog = setTimeout(() => {
    say(`not finished after ${WATCHDOG_MS / 1000} s; stopping`)
    killStarted(started)
    process.exit(1)
  }, WATCHDOG_MS)
  watchdog.unref()

  try {
    database = await ownDatabase(process.env.ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')
    say(`seeding ${messages} messages`)
    await seedDatabase({ url: database.url, messages, users: 100, ifEmpty: false, quiet: true })

    say(`starting ${INSTANCES} instances on ${nodeVersion(node)}`)
    const stack: Stack = await startStack({ node, config, databaseUrl: database.url, instances: INSTANCES, work, startTimeoutMs: START_TIMEOUT_MS, tokens: 8, subject: 'rolling' }, started)
    const { base, tokens, balancer } = stack

    const sql = postgres(database.url, { max: 1, onnotice: () => {} })
    const ids = (await sql<Array<{ id: number }>>`SELECT id::float8 AS id FROM messages ORDER BY random() LIMIT 5000`).map((r) => r.id)
    const [{ seededMaxId } = { seededMaxId: 0 }] = await sql<Array<{ seededMaxId: number }>>`SELECT coalesce(max(id), 0)::float8 AS "seededMaxId" FROM messages`
    await sql.end()

    let phase: Phase = 'warmup'
    // One initial copy by polls, shared: each client starts from it as if it had loaded it itself,
    // except one of each kind, which loads its own (the stream's and the poll's initial copy).
    const start = await initialCopy(base)
    say(`live: ${liveClients} SSE and ${liveClients} long-poll clients through HAProxy`)
    live = startLiveClients({ base, sse: liveClients, longPolls: liveClients, fromScratch: 1, phase: () => phase, start })
    await live.ready
    say(`load: ${rate} requests/s from ${WORKERS} connections through HAProxy`)
    load = startLoad({ base, rate, workers: WORKERS, tokens, ids, keyPrefix: `rr-${Date.now().toString(36)}`, phase: () => phase, onCreated: live.created })
    await sleep(WARMUP_MS)
    phase = 'rest'
    await sleep(REST_MS)

    const restarts: Restart[] = []
    async function restart (instance: Instance, how: 'SIGTERM' | 'SIGKILL'): Promise<void> {
      const signalled = performance.now()
      const exit = await instance.stop(how, STOP_TIMEOUT_MS)
      const stoppedMs = performance.now() - signalled
      // The new process takes the same address only once HAProxy has seen the old one go.
      await balancer.marked(instance.name, 'DOWN', signalled, MARK_TIMEOUT_MS)
      if (how === 'SIGKILL') await sleep(CRASH_DOWNTIME_MS)
      if (exit === null) instance.kill()
      const started = performance.now()
      await instance.start(START_TIMEOUT_MS)
      const up = await balancer.marked(instance.name, 'UP', started, MARK_TIMEOUT_MS)
      restarts.push({ instance: instance.name, how, exit: describeExit(exit), stoppedMs, backMs: up - signalled })
      say(`${instance.name}: ${how}, ${describeExit(exit)} after ${Math.round(stoppedMs)} ms, marked up after ${Math.round(up - signalled)} ms`)
    }

    phase = 'rolling'
    for (const instance of instances) await restart(instance, 'SIGTERM')
    phase = 'rest'
    await sleep(REST_MS / 2)
    phase = 'crash'
    await restart(instances[1] as Instance, 'SIGKILL')
    phase = 'rest'
    await sleep(REST_MS / 2)

    const result = await load.stop()
    load = undefined
    const liveResult = await live.stop(database.url, LIVE_SETTLE_MS)
    live = undefined
    const report = {
      node: nodeVersion(node),
      haproxy,
      config: config.startsWith(ROOT) ? relative(ROOT, config) : config,
      messages,
      rate,
      load: result,
      live: liveResult,
      restarts,
      retries: balancer.retries,
      verification: await verify(database.url, seededMaxId, result)
    }
    const table = renderReport(report)
    process.stdout.write(table + '\n')
    if (values.out !== undefined) writeFileSync(values.out, table + '\n')
    const failed = verdicts(report).filter((v) => !v.ok)
    if (failed.length > 0) {
      keep = true
      say(`FAILED: ${failed.map((v) => v.name).join('; ')} (logs kept in ${work})`)
      return 1
    }
    say(keep ? `passed (logs kept in ${work})` : 'passed')
    return 0
  } catch (err) {
    keep = true
    say(`${(err as Error).message} (logs kept in ${work})`)
    return 1
  } finally {
    clearTimeout(watchdog)
    await load?.stop().catch(() => {})
    await live?.close().catch(() => {})
    await started.stop?.(STOP_TIMEOUT_MS)
    await database?.drop().catch((err: Error) => say(`could not drop the check's database: ${err.message}`))
    if (!keep) rmSync(work, { recursive: true, force: true })
  }
}

try {
  process.exitCode = await main(process.argv.slice(2))
} catch (err) {
  if (!(err instanceof CheckError) && !(err instanceof TypeError)) throw err
  say(err.message)
  process.exitCode = 1
}
