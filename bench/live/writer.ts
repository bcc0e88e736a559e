/**
 * The writes of a live row: at a set rate, open loop (a slow write does not hold the next one back, up to
 * MAX_IN_FLIGHT at once), alternately POST /v2/messages with real tokens and an INSERT by a PostgreSQL
 * connection of the benchmark's own. Each write's commit time is when its 201 arrived or its INSERT returned.
 */
import type { Sql } from 'postgres'
import { request } from 'undici'
import { wallClock, type CommittedWrite } from './protocol.js'

const MAX_IN_FLIGHT = 64
const TICK_MS = 2

export interface WriterPlan {
  base: string
  /** Bearer tokens of the API writes, used in turn. */
  tokens: readonly string[]
  /** Message bodies (JSON) used in turn by both kinds of write. */
  bodies: readonly string[]
  /** The SQL writer's connection; without it (the embedded database) every write goes through the API. */
  sql?: Sql
  /** Authors of the SQL writes (existing users). */
  authorIds: readonly number[]
  /** Writes per second. */
  rate: number
  /** Told of every commit as it returns. */
  onCommit: (id: number, time: number) => void
}

export interface WriterSummary {
  writes: CommittedWrite[]
  api: number
  sql: number
  failed: number
  problems: string[]
  /** From the first write to stop(). */
  seconds: number
}

export interface LiveWriter {
  /** Changes the rate from now on (the saturation row's steps). */
  setRate: (rate: number) => void
  /** Writes made so far (each step's achieved rate). */
  count: () => number
  stop: () => Promise<WriterSummary>
}

interface Body { content: string, subject?: string, priority?: string }

export function startLiveWriter (plan: WriterPlan): LiveWriter {
  const parsed = plan.bodies.map((b) => JSON.parse(b) as Body)
  const summary: WriterSummary = { writes: [], api: 0, sql: 0, failed: 0, problems: [], seconds: 0 }
  const began = performance.now()
  let origin = began
  let rate = plan.rate
  let issuedAtOrigin = 0
  let issued = 0
  let inFlight = 0
  let stopped = false
  const flights = new Set<Promise<void>>()

  const failed = (text: string): void => {
    summary.failed++
    if (summary.problems.length < 3) summary.problems.push(text)
  }
  const committed = (id: number, start: number): void => {
    const commit = wallClock()
    summary.writes.push({ id, start, commit })
    plan.onCommit(id, commit)
  }

  async function viaApi (n: number): Promise<void> {
    const start = wallClock()
    const response = await request(`${plan.base}/v2/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${plan.tokens[n % plan.tokens.length]!}`, 'content-type': 'application/json' },
      body: plan.bodies[n % plan.bodies.length]!,
      headersTimeout: 30_000,
      bodyTimeout: 30_000
    })
    const text = await response.body.text()
    if (response.statusCode !== 201) return failed(`a POST answered ${response.statusCode}: ${text.slice(0, 80)}`)
    committed(Number((JSON.parse(text) as { id: number }).id), start)
    summary.api++
  }

  async function viaSql (sql: Sql, n: number): Promise<void> {
    const body = parsed[n % parsed.length]!
    const start = wallClock()
    const [row] = await sql<Array<{ id: string }>>`insert into messages (content, subject, priority, author_id)
      values (${body.content}, ${body.subject ?? null}, ${body.priority ?? 'normal'}, ${plan.authorIds[n % plan.authorIds.length]!}) returning id`
    committed(Number(row!.id), start)
    summary.sql++
  }

  function issue (): void {
    const n = issued++
    inFlight++
    const write = (plan.sql !== undefined && n % 2 === 1 ? viaSql(plan.sql, n) : viaApi(n))
      .catch((err: Error) => failed(`a write failed: ${err.message}`))
      .finally(() => { inFlight--; flights.delete(write) })
    flights.add(write)
  }

  const timer = setInterval(() => {
    if (stopped) return
    const due = issuedAtOrigin + Math.floor((performance.now() - origin) * rate / 1000) + 1
    while (issued < due && inFlight < MAX_IN_FLIGHT) issue()
  }, TICK_MS)
  timer.unref()

  return {
    setRate (next) {
      origin = performance.now()
      issuedAtOrigin = issued
      rate = next
    },
    count: () => summary.writes.length,
    async stop () {
      stopped = true
      clearInterval(timer)
      await Promise.all([...flights])
      summary.seconds = (performance.now() - began) / 1000
      return summary
    }
  }
}
