/**
 * The write path with live delivery: POST /v2/messages under autocannon (as rows/post.ts sends it) on the
 * service with live delivery on and no client connected, and on a second service on the same database with
 * it off (LIVE_MAX_CONNECTIONS=0), rounds alternated; PostgreSQL's CPU per created message in each. Then
 * POST again with WRITE_PATH_CLIENTS SSE clients open, their deliveries beside the throughput.
 */
import { loadavg } from 'node:os'
import { runCannon, type CannonRequest, type CannonResult } from '../load/autocannon.js'
import { rotatingPost } from '../rows/post.js'
import { startService, stopChild, type Child } from '../servers/child-servers.js'
import { settle } from '../database/wait-quiet.js'
import { clientProblems, DRAIN_MS, exactProblems, openClients, tableProblems } from './delivery.js'
import { postgresCpu } from './proc.js'
import { UNKNOWN_COMMIT, UNKNOWN_START, wallClock, type CommittedWrite } from './protocol.js'
import type { PostRound, WritePathReport } from './report.js'
import { WRITE_PATH_CLIENTS, WRITE_PATH_KEY } from './rows.js'
import { commitSender, type LiveSession } from './session.js'

const ROUNDS = 2

function posts (session: LiveSession, tokens: string[]): CannonRequest[] {
  return rotatingPost('/v2/messages', (n) => ({ token: tokens[n % tokens.length]!, body: session.bodies[n % session.bodies.length]! }))
}

async function load (session: LiveSession, child: Child, requests: CannonRequest[]): Promise<CannonResult> {
  return await runCannon({ url: child.base, connections: session.cannonConnections, duration: session.seconds, maxOverallRequests: session.seconds * 60_000, timeout: 10, requests })
}

function statusProblems (result: CannonResult, label: string): string[] {
  const other = Object.entries(result.statusCodeStats).filter(([code]) => code !== '201')
  const problems = other.length > 0 ? [`${label}: answers other than 201: ${other.map(([code, s]) => `${s.count}× ${code}`).join(', ')}`] : []
  if (result.errors + result.timeouts > 0) problems.push(`${label}: ${result.errors} connection errors (${result.timeouts} timeouts)`)
  return problems
}

async function round (session: LiveSession, child: Child, live: 'on' | 'off', name: string, problems: string[]): Promise<PostRound> {
  const tokens = await session.posters(name)
  await settle(session.oracle)
  const postgres = session.postgresHere === undefined ? undefined : postgresCpu(session.postgresHere)
  const result = await load(session, child, posts(session, tokens))
  const cpu = postgres?.stop() ?? 0
  const created = result.statusCodeStats['201']?.count ?? 0
  problems.push(...statusProblems(result, `live ${live}, ${name}`))
  process.stdout.write(`bench: live write path, live ${live}: ${Math.round(result.requests.average)} req/s, p99 ${result.latency.p99} ms, ${created} created\n`)
  return { live, rps: result.requests.average, p99: result.latency.p99, created, postgresCpuMsPerMessage: session.postgresHere !== undefined && created > 0 ? cpu * 1000 / created : undefined, load: loadavg()[0]! }
}

/** POST with SSE clients open: every created id and its commit time go to the load client, as a writer's do. */
async function withClients (session: LiveSession, report: WritePathReport): Promise<void> {
  const clients = await openClients(session, { mode: 'sse', connections: WRITE_PATH_CLIENTS })
  report.problems.push(...clients.problems)
  try {
    const sender = commitSender(clients.fleet)
    const writes: CommittedWrite[] = []
    const [post] = posts(session, await session.posters('with-clients'))
    const requests: CannonRequest[] = [{
      ...post,
      setupRequest: (request, context) => {
        context.start = wallClock()
        return post!.setupRequest!(request, context)
      },
      onResponse: (status, body, context) => {
        if (status !== 201) return
        const commit = wallClock()
        const id = Number((JSON.parse(body) as { id: number }).id)
        writes.push({ id, start: context.start as number, commit })
        sender.add(id, commit)
      }
    }]
    await settle(session.oracle)
    const postgres = session.postgresHere === undefined ? undefined : postgresCpu(session.postgresHere)
    const writeStart = wallClock()
    const result = await load(session, session.service, requests)
    const cpu = postgres?.stop() ?? 0
    sender.stop()
    // Creates answered after autocannon stopped listening are in the table all the same: the clients must get them too.
    if (session.oracle.live) {
      const seen = new Set(writes.map((w) => w.id))
      const rows = await session.oracle.rows<{ id: string }>('select id from messages where id >= $1', [clients.baseId])
      for (const { id } of rows) if (!seen.has(Number(id))) writes.push({ id: Number(id), start: UNKNOWN_START, commit: UNKNOWN_COMMIT })
    }
    const finished = await clients.fleet.finish(writes, DRAIN_MS)
    const created = result.statusCodeStats['201']?.count ?? 0
    report.problems.push(...statusProblems(result, `${WRITE_PATH_CLIENTS} SSE clients`), ...exactProblems(finished.exact, WRITE_PATH_CLIENTS, writes.length), ...clientProblems(finished))
    const table = await tableProblems(session, clients.baseId, writes)
    if (table !== undefined && (table.missing > 0 || table.extra > 0)) report.problems.push(`the table lacks ${table.missing} created ids and holds ${table.extra} that nobody wrote`)
    const receiving = Math.max(0.001, (finished.total.last - writeStart) / 1000)
    report.withClients = {
      clients: WRITE_PATH_CLIENTS,
      rps: result.requests.average,
      p99: result.latency.p99,
      created,
      deliveriesPerSecond: finished.total.events / receiving,
      delay: finished.total.delay,
      exact: finished.exact,
      postgresCpuMsPerMessage: session.postgresHere !== undefined && created > 0 ? cpu * 1000 / created : undefined
    }
    process.stdout.write(`bench: live write path with ${WRITE_PATH_CLIENTS} SSE clients: ${Math.round(result.requests.average)} req/s, ` +
      `${Math.round(report.withClients.deliveriesPerSecond)} deliveries/s, delay p99 ${finished.total.delay.p99.toFixed(1)} ms\n`)
  } finally {
    await clients.fleet.stop()
  }
}

export async function runWritePath (session: LiveSession): Promise<WritePathReport> {
  const report: WritePathReport = { key: WRITE_PATH_KEY, name: 'Write path', seconds: session.seconds, connections: session.cannonConnections, rounds: [], problems: [] }
  const off = await startService(session.plan, { LIVE_MAX_CONNECTIONS: '0' }, 'service-live-off')
  try {
    for (let n = 0; n < ROUNDS; n++) {
      // Alternated, so a drift of the machine over the rounds is not charged to one setting.
      const order = n % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)
      for (const live of order) report.rounds.push(await round(session, live === 'on' ? session.service : off, live, `live-${live}-${n}`, report.problems))
    }
  } finally {
    await stopChild(off)
  }
  await withClients(session, report)
  return report
}
