import { relative } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { seedDatabase } from '../seed.js'
import type { Instance } from '../deploy-checks/instance.js'
import type { Phase } from '../deploy-checks/load.js'
import { renderReport, verdicts, type Restart } from './report.js'
import { checkArgs, exitWith, runCheck, startTraffic } from '../deploy-checks/run.js'
import { CheckError, ROOT, describeExit, nodeVersion, startStack, type Stack } from '../deploy-checks/stack.js'
import { verify } from '../deploy-checks/verify.js'

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

async function main (argv: string[]): Promise<number> {
  const args = checkArgs(argv, USAGE, { messages: 20_000, live: 20 })
  if (args === undefined) return 0
  return await runCheck({ name: 'rolling-restart', args, watchdogMs: WATCHDOG_MS, stopTimeoutMs: STOP_TIMEOUT_MS, say }, async (context) => {
    const database = await ownDatabase(process.env.ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')
    context.onEnd(async () => { await database.drop() })
    say(`seeding ${args.messages} messages`)
    await seedDatabase({ url: database.url, messages: args.messages, users: 100, ifEmpty: false, quiet: true })

    say(`starting ${INSTANCES} instances on ${nodeVersion(args.node)}`)
    const stack: Stack = await startStack({ node: args.node, config: args.config, databaseUrl: database.url, instances: INSTANCES, work: context.work, startTimeoutMs: START_TIMEOUT_MS, tokens: 8, subject: 'rolling' }, context.started)
    const { base, tokens, balancer, instances } = stack

    const sql = postgres(database.url, { max: 1, onnotice: () => {} })
    const ids = (await sql<Array<{ id: number }>>`SELECT id::float8 AS id FROM messages ORDER BY random() LIMIT 5000`).map((r) => r.id)
    const [{ seededMaxId } = { seededMaxId: 0 }] = await sql<Array<{ seededMaxId: number }>>`SELECT coalesce(max(id), 0)::float8 AS "seededMaxId" FROM messages`
    await sql.end()

    let phase: Phase = 'warmup'
    const traffic = await startTraffic({ base, tokens, ids, rate: args.rate, workers: WORKERS, live: args.live, keyPrefix: `rr-${Date.now().toString(36)}`, phase: () => phase, say })
    context.traffic = traffic
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

    const { load, live } = await traffic.stop(database.url, LIVE_SETTLE_MS)
    const report = {
      node: nodeVersion(args.node),
      haproxy: args.haproxy,
      config: args.config.startsWith(ROOT) ? relative(ROOT, args.config) : args.config,
      messages: args.messages,
      rate: args.rate,
      load,
      live,
      restarts,
      retries: balancer.retries,
      verification: await verify(database.url, seededMaxId, load)
    }
    return { table: renderReport(report), failed: verdicts(report).filter((v) => !v.ok).map((v) => v.name) }
  })
}

await exitWith(say, async () => await main(process.argv.slice(2)))
