/** What the live rows share: the service they measure, the change feed's position, the writers' means, and small helpers. */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Sql } from 'postgres'
import { request } from 'undici'
import type { Oracle } from '../checks/reference-sql.js'
import type { Child, ServerPlan } from '../servers/child-servers.js'
import { followFeed, SYNC_LIMIT } from '../delta-sync/section.js'
import type { Fleet } from './fleet.js'
import { readLiveMetrics } from './metrics.js'
import { cpuSeconds, postgresCpu, rssKb } from './proc.js'

export interface LiveSession {
  service: Child
  oracle: Oracle
  /** How to start another service on the same database (the write path's live-off service). */
  plan: ServerPlan
  embedded: boolean
  /** The SQL writer's own connection (PostgreSQL only), and the users its messages are written as. */
  sql?: Sql
  authorIds: number[]
  /** API writers' bearer tokens, and the bodies every write sends. */
  apiTokens: string[]
  bodies: string[]
  /** Seconds each row writes. */
  seconds: number
  /** autocannon connections of the write path (--connections). */
  cannonConnections: number
  /** A caught-up token of the change feed, moved forward before each row. */
  token: string
  /** The database's name when PostgreSQL's processes are visible on this machine (their CPU time is read). */
  postgresHere: string | undefined
  /** Fresh POST callers for a round of the write path, new subjects included (see bench/run/caller-tokens.ts). */
  posters: (round: string) => Promise<string[]>
}

const SERVING_TIMEOUT_MS = 120_000

/** Waits until the service answers the change feed without shedding load (a row before may have left it busy). */
async function waitServing (base: string, token: string): Promise<void> {
  const deadline = Date.now() + SERVING_TIMEOUT_MS
  for (;;) {
    const response = await request(`${base}/v2/messages/changes?since=${token}`, { headersTimeout: 30_000, bodyTimeout: 30_000 })
    await response.body.text()
    if (response.statusCode !== 503 || Date.now() > deadline) return
    await sleep(500)
  }
}

/** Moves the session's token to the end of the feed (the changes since the last row: a few calls). */
export async function catchUp (session: LiveSession): Promise<string> {
  await waitServing(session.service.base, session.token)
  session.token = (await followFeed(session.service.base, session.token, SYNC_LIMIT)).next
  return session.token
}

/** The id the next message will get at least: the highest id in the table, plus one. */
export async function nextMessageId (base: string): Promise<number> {
  const response = await request(`${base}/v2/messages?limit=1&order=desc`, { headersTimeout: 30_000, bodyTimeout: 30_000 })
  const page = await response.body.json() as { data: Array<{ id: number }> }
  return (page.data[0]?.id ?? 0) + 1
}

/** Waits until the service holds `count` long-polls and streams (its own gauges), or `timeoutMs`; returns what it held. */
export async function waitHeld (base: string, count: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs
  let held = 0
  while (Date.now() < deadline) {
    const metrics = await readLiveMetrics(base)
    held = metrics.heldPolls + metrics.openStreams
    if (held >= count) return held
    await sleep(200)
  }
  return held
}

/** The median of `samples` readings of a process's VmRSS, `gapMs` apart, in MB: one reading catches a collection half done. */
export async function steadyRssMb (pid: number | undefined, samples = 5, gapMs = 200): Promise<number> {
  const readings: number[] = []
  for (let i = 0; i < samples; i++) {
    readings.push(rssKb(pid))
    if (i < samples - 1) await sleep(gapMs)
  }
  readings.sort((a, b) => a - b)
  return readings[readings.length >> 1]! / 1024
}

export interface CpuUse { service: number, client: number, postgres?: number }

/** CPU seconds a second from now until stop(): the service, the load client, PostgreSQL for the session's database. */
export function watchCpu (session: LiveSession, client: Pick<Fleet, 'pid'> | undefined): { stop: () => CpuUse } {
  const began = performance.now()
  const pids = { service: session.service.process.pid, client: client?.pid }
  const before = { service: cpuSeconds(pids.service), client: cpuSeconds(pids.client) }
  const postgres = session.postgresHere === undefined ? undefined : postgresCpu(session.postgresHere)
  return {
    stop () {
      const seconds = (performance.now() - began) / 1000
      const pg = postgres?.stop()
      return {
        service: (cpuSeconds(pids.service) - before.service) / seconds,
        client: (cpuSeconds(pids.client) - before.client) / seconds,
        postgres: pg === undefined ? undefined : pg / seconds
      }
    }
  }
}

/** Transactions the database has ended so far, by every client (PostgreSQL's statistics, flushed about once a second). */
export async function transactions (session: LiveSession): Promise<number | undefined> {
  if (!session.oracle.live || session.embedded) return undefined
  const [row] = await session.oracle.rows<{ n: string }>('select xact_commit + xact_rollback as n from pg_stat_database where datname = current_database()')
  return Number(row!.n)
}

/** Commit times on their way to the load client, sent every FLUSH_MS rather than one message each. */
export function commitSender (fleet: Fleet): { add: (id: number, time: number) => void, stop: () => void } {
  let ids: number[] = []
  let times: number[] = []
  const flush = (): void => {
    if (ids.length === 0) return
    fleet.commits(ids, times)
    ids = []
    times = []
  }
  const timer = setInterval(flush, 10)
  timer.unref()
  return {
    add: (id, time) => { ids.push(id); times.push(time) },
    stop: () => { clearInterval(timer); flush() }
  }
}
