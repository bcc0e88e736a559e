/**
 * The live delivery section (CONTRACT 9, 13), after the other rows: the rows asked for, in the order of
 * rows.ts, on the running service, then the targets set beside the figures (reported, not enforced).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { postBodies } from '../load/message-bodies.js'
import type { Tokens } from '../run/caller-tokens.js'
import { BenchError } from '../run/bench-error.js'
import { EVERYTHING, type Oracle } from '../checks/reference-sql.js'
import type { Child, ServerPlan } from '../servers/child-servers.js'
import { settle } from '../database/wait-quiet.js'
import { followFeed, SYNC_LIMIT } from '../delta-sync/section.js'
import { runCatchUp } from './catch-up.js'
import { runDelivery } from './delivery.js'
import { runFair } from './fair.js'
import { runMemory } from './memory.js'
import { postgresVisible } from './proc.js'
import { liveProblems, roundsOf, type DeliveryReport, type LiveReport, type LiveTarget } from './report.js'
import { CATCH_UP_KEY, DELIVERY_ROWS, FAIR_KEY, LIVE_KEYS, MEMORY_KEY, SATURATION_ROWS, WRITE_PATH_KEY } from './rows.js'
import { runSaturation } from './saturation.js'
import type { LiveSession } from './session.js'
import { runWritePath } from './write-path.js'

export interface LivePlan {
  keys: ReadonlySet<string>
  service: Child
  oracle: Oracle
  tokens: Tokens
  server: ServerPlan
  seconds: number
  connections: number
}

export const wantsLive = (keys: ReadonlySet<string>): boolean => LIVE_KEYS.some((key) => keys.has(key))

const ms = (n: number): string => `${n.toFixed(1)} ms`

function deliveryTargets (rows: DeliveryReport[]): LiveTarget[] {
  const targets: LiveTarget[] = []
  for (const r of rows) {
    if (r.connections <= 1000) {
      targets.push({ what: `${r.name}: delay p50`, value: ms(r.delay.p50), target: '≤ 10 ms', met: r.delay.p50 <= 10 })
      targets.push({ what: `${r.name}: delay p99`, value: ms(r.delay.p99), target: '≤ 50 ms', met: r.delay.p99 <= 50 })
    } else targets.push({ what: `${r.name}: delay p99`, value: ms(r.delay.p99), target: '≤ 100 ms', met: r.delay.p99 <= 100 })
  }
  for (const mode of ['poll', 'sse'] as const) {
    const small = rows.find((r) => r.mode === mode && r.connections === 100)
    const large = rows.find((r) => r.mode === mode && r.connections === 10_000)
    if (small === undefined || large === undefined) continue
    const ratio = large.watch.queriesPerSecond / small.watch.queriesPerSecond
    targets.push({
      what: `${mode === 'sse' ? 'SSE' : 'long-poll'}: watch queries/s at 10,000 clients ÷ at 100`,
      value: `${large.watch.queriesPerSecond.toFixed(1)} ÷ ${small.watch.queriesPerSecond.toFixed(1)} = ${ratio.toFixed(2)}×`,
      target: 'within 10 %',
      met: Math.abs(ratio - 1) <= 0.1
    })
  }
  return targets
}

function sectionTargets (report: LiveReport): LiveTarget[] {
  const targets = deliveryTargets(report.rows)
  for (const idle of report.memory?.idle ?? []) {
    targets.push({ what: `RSS per idle ${idle.mode === 'sse' ? 'SSE stream' : 'held long-poll'}`, value: `${idle.perConnectionKb.toFixed(1)} KB`, target: '≤ 20 KB', met: idle.perConnectionKb <= 20 })
  }
  const c = report.catchUp
  if (c !== undefined) {
    targets.push({ what: `${c.name}: cut-offs`, value: String(c.cutOffs), target: '0', met: c.cutOffs === 0 })
    targets.push({ what: `${c.name}: reconnections`, value: String(c.reconnects), target: '0', met: c.reconnects === 0 })
    targets.push({ what: `${c.name}: service peak RSS above idle`, value: `${c.rss.aboveIdleMb.toFixed(0)} MB`, target: '≤ 256 MB', met: c.rss.aboveIdleMb <= 256 })
  }
  const f = report.fair
  if (f !== undefined) {
    // CONTRACT 16: while one address holds 64 slow streams.
    const { others } = f
    targets.push({ what: `${f.name}: other clients' headers, slowest`, value: others.headers < others.streams ? `${others.streams - others.headers} never` : ms(others.headersMs.max), target: '≤ 1 s', met: others.headers === others.streams && others.headersMs.max <= 1000 })
    targets.push({ what: `${f.name}: other clients' first event, slowest`, value: others.firstEvents < others.streams ? `${others.streams - others.firstEvents} never` : ms(others.firstEventMs.max), target: '≤ 5 s', met: others.firstEvents === others.streams && others.firstEventMs.max <= 5000 })
    targets.push({ what: `${f.name}: other clients' delay p99`, value: ms(others.delay.p99), target: '≤ 50 ms', met: others.delay.count > 0 && others.delay.p99 <= 50 })
    targets.push({ what: `${f.name}: unsent at most`, value: `${f.unsentPeakMb.toFixed(1)} MB`, target: `≤ ${f.unsentBoundMb.toFixed(0)} MB`, met: f.unsentPeakMb <= f.unsentBoundMb })
  }
  const w = report.writePath
  if (w !== undefined && w.rounds.length > 0) {
    const on = roundsOf(w, 'on')
    const off = roundsOf(w, 'off')
    targets.push({ what: 'POST req/s, live on (no client) ÷ off', value: `${(on.rps / off.rps).toFixed(3)}×`, target: '≥ 0.95×', met: on.rps / off.rps >= 0.95 })
    if (on.cpu !== undefined && off.cpu !== undefined) {
      const change = on.cpu / off.cpu - 1
      targets.push({ what: 'PostgreSQL CPU per created message, live on ÷ off', value: `${on.cpu.toFixed(3)} ÷ ${off.cpu.toFixed(3)} ms (${(change * 100).toFixed(1)} %)`, target: 'within 5 %', met: Math.abs(change) <= 0.05 })
    }
  }
  return targets
}

async function openSession (plan: LivePlan): Promise<LiveSession> {
  const { service, oracle, server } = plan
  process.stdout.write('bench: live: walking the change feed to its end for a caught-up token\n')
  const walk = await followFeed(service.base, undefined, SYNC_LIMIT)
  const embedded = server.embedded
  let sql: postgres.Sql | undefined
  let authorIds: number[] = []
  if (!embedded) {
    // The SQL writer's connection: another client of the database, as CONTRACT 12 and 13 allow.
    sql = postgres(server.databaseUrl, { max: 4, onnotice: () => {}, connection: { application_name: 'bench-live-writer' } })
    authorIds = (await sql<Array<{ id: string }>>`select id from users order by id limit 200`).map((r) => Number(r.id))
    if (authorIds.length === 0) throw new BenchError('the database has no users for the SQL writes')
  }
  return {
    service,
    oracle,
    plan: server,
    embedded,
    sql,
    authorIds,
    apiTokens: await plan.tokens.post('live'),
    bodies: postBodies(),
    seconds: plan.seconds,
    cannonConnections: plan.connections,
    token: walk.next,
    postgresHere: !embedded && postgresVisible() ? decodeURIComponent(new URL(server.databaseUrl).pathname.slice(1)) || 'postgres' : undefined,
    posters: async (round) => await plan.tokens.post(`live-${round}`)
  }
}

async function pause (oracle: Oracle): Promise<void> {
  await settle(oracle)
  await sleep(1000)
}

export async function runLive (plan: LivePlan): Promise<LiveReport> {
  const { keys, oracle } = plan
  const session = await openSession(plan)
  const report: LiveReport = {
    database: session.embedded ? `embedded (${oracle.label})` : oracle.label,
    messages: await oracle.count(EVERYTHING),
    durationSeconds: plan.seconds,
    rows: [],
    saturation: [],
    targets: [],
    problems: []
  }
  // A row that cannot run (its clients cannot open, the service exits) is a problem of the section; the rest go on.
  const guarded = async (what: string, run: () => Promise<void>): Promise<void> => {
    try {
      await run()
    } catch (err) {
      report.problems.push(`${what}: ${err instanceof BenchError ? err.message : (err as Error).stack ?? String(err)}`)
      process.stdout.write(`bench: live ${what} FAILED: ${(err as Error).message}\n`)
    }
    await pause(oracle)
  }
  try {
    // The memory row first: after a row under load the heap holds garbage of its own, which moves VmRSS by more than 10,000 idle connections do.
    if (keys.has(MEMORY_KEY)) await guarded(MEMORY_KEY, async () => { report.memory = await runMemory(session) })
    for (const spec of DELIVERY_ROWS.filter((r) => keys.has(r.key))) await guarded(spec.key, async () => { report.rows.push(await runDelivery(session, spec)) })
    if (keys.has(CATCH_UP_KEY) && !session.embedded) await guarded(CATCH_UP_KEY, async () => { report.catchUp = await runCatchUp(session) })
    if (keys.has(FAIR_KEY)) await guarded(FAIR_KEY, async () => { report.fair = await runFair(session) })
    for (const spec of SATURATION_ROWS.filter((r) => keys.has(r.key))) await guarded(spec.key, async () => { report.saturation.push(await runSaturation(session, spec)) })
    if (keys.has(WRITE_PATH_KEY) && !session.embedded) await guarded(WRITE_PATH_KEY, async () => { report.writePath = await runWritePath(session) })
  } finally {
    await session.sql?.end()
  }
  report.targets = sectionTargets(report)
  for (const problem of liveProblems(report)) process.stdout.write(`bench: live problem: ${problem}\n`)
  return report
}
