import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import type { Instance } from '../deploy-checks/instance.js'
import { runScenario, START_TIMEOUT_MS, STOP_TIMEOUT_MS, type ScenarioDatabase } from '../deploy-checks/scenario.js'
import { CheckError, describeExit } from '../deploy-checks/stack.js'
import { renderReport, verdicts, type Restart } from './report.js'

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

const MARK_TIMEOUT_MS = 20_000
const REST_MS = 15_000
const CRASH_DOWNTIME_MS = 2000

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

await runScenario({
  name: 'rolling-restart',
  usage: USAGE,
  defaults: { messages: 20_000, live: 20 },
  instances: 3,
  keyPrefix: 'rr',
  watchdogMs: 6 * 60_000,

  async database (context): Promise<ScenarioDatabase> {
    const database = await ownDatabase(process.env.ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')
    context.onEnd(async () => { await database.drop() })
    return { seedUrl: database.url, serviceUrl: database.url, finalUrl: database.url }
  },

  async underLoad ({ stack: { balancer, instances }, setPhase, say }) {
    setPhase('rest')
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

    setPhase('rolling')
    for (const instance of instances) await restart(instance, 'SIGTERM')
    setPhase('rest')
    await sleep(REST_MS / 2)
    setPhase('crash')
    await restart(instances[1] as Instance, 'SIGKILL')
    setPhase('rest')
    await sleep(REST_MS / 2)
    return restarts
  },

  async report (shared, restarts, { stack }) {
    const report = { ...shared, restarts, retries: stack.balancer.retries }
    return { table: renderReport(report), failed: verdicts(report).filter((v) => !v.ok).map((v) => v.name) }
  }
})
