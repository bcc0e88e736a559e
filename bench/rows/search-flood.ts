/**
 * The search flood (CONTRACT 16, expensive public reads): FLOOD_CLIENTS clients from one address ask for
 * searches of two-letter terms, every request another term, sort, order or filter, so that each is a read
 * of the term's matches that nothing has cached. In the same window another address reads items and page
 * 1 and creates messages, one request at a time each, and a third searches, one at a time. Each load is
 * reported as a row of its own: the flood by its statuses (2xx, 503, other), the others held to the
 * contract (2xx; the cheap ones with p99 under 1 s; every answer within the statement timeout and 2 s).
 * At the end every client disconnects, and three seconds later no search of theirs may still run.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Oracle } from '../checks/reference-sql.js'
import { runAddressLoads, quantile, type AddressLoad, type AddressResult } from '../load/address-clients.js'
import { shuffled } from '../load/cold-order.js'
import { probeHealth, sampleRss } from '../load/memory-and-health-probes.js'
import { postBodies } from '../load/message-bodies.js'
import { int, type Measurement } from '../report/bench-report.js'
import type { Server } from '../servers/child-servers.js'
import { COLD_SEED } from './cold.js'
import { requireOracle, type RowBuilder, type TogetherPart } from './row.js'

export const SEARCH_FLOOD_KEY = 'search-flood'
const FLOOD_CLIENTS = 48
// Loopback addresses of their own: the service tells clients apart by address.
const FLOODER = '127.0.0.2'
const BESIDE = '127.0.0.3'
const BYSTANDER = '127.0.0.4'
// What the contract holds the cheap requests to, and how long after the clients left a search may run.
const CHEAP_P99_MS = 1000
const GONE_AFTER_MS = 3000
// The service's statement timeout (it reads the same variable, default 10 s): every answer within it and 2 s.
const STATEMENT_TIMEOUT_MS = Number(process.env.DATABASE_STATEMENT_TIMEOUT_MS ?? 10_000)
const ANSWER_WITHIN_MS = STATEMENT_TIMEOUT_MS + 2000
// A client waits longer than that, to see the late answers rather than cut them off.
const CLIENT_TIMEOUT_MS = ANSWER_WITHIN_MS + 5000

const LETTERS = 'abcdefghijklmnopqrstuvwxyz'
const ORDERS = ['', '&sort=id&order=desc', '&sort=createdAt', '&sort=createdAt&order=desc', '&sort=subject', '&sort=subject&order=desc', '&sort=priority', '&sort=priority&order=desc']
const FILTERS = ['', '&priority=low', '&priority=normal', '&priority=high', '&priority=urgent']

/** Every two-letter term in every order and under every priority filter: each path a read of ids of its own. */
function floodPaths (): string[] {
  const paths: string[] = []
  for (const a of LETTERS) {
    for (const b of LETTERS) for (const order of ORDERS) for (const filter of FILTERS) paths.push(`/v2/messages/search?q=${a}${b}&limit=25${order}${filter}`)
  }
  return shuffled(paths.length, paths.length, COLD_SEED + 2).map((n) => paths[n - 1]!)
}

/** The searches of the flood's clients still running (they read a term's matches with search_id_list). */
async function searchesRunning (oracle: Oracle): Promise<number> {
  const [row] = await oracle.rows<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database()
    and application_name = 'messages-api' and state = 'active' and query like '%search_id_list%'`)
  return row?.n ?? 0
}

const statusCount = (result: AddressResult, ok: (status: number) => boolean): number =>
  Object.entries(result.statuses).reduce((n, [status, count]) => ok(Number(status)) ? n + count : n, 0)
const is2xx = (status: number): boolean => status >= 200 && status < 300

/** A load's figures as a row's measurement, with the problems the contract sees in it. */
function measurementOf (result: AddressResult, beside: Pick<Measurement, 'peakRssMb' | 'health'>, problems: string[]): Measurement {
  const answered = result.latencies.length
  const late = result.latencies.filter((ms) => ms > ANSWER_WITHIN_MS).length
  if (late > 0) problems.push(`${int(late)} answers came later than the statement timeout and 2 s (${int(ANSWER_WITHIN_MS)} ms)`)
  if (result.errors > 0) problems.push(`${int(result.errors)} requests had no answer within ${int(CLIENT_TIMEOUT_MS)} ms, or failed`)
  if (answered === 0) problems.push('no request was answered')
  return {
    requests: answered,
    rps: result.seconds > 0 ? answered / result.seconds : 0,
    p50: quantile(result.latencies, 0.5),
    p99: quantile(result.latencies, 0.99),
    non2xx: answered - statusCount(result, is2xx),
    errors: result.errors,
    ...beside,
    problems
  }
}

/** The statuses other than those allowed, as a problem. */
function otherStatuses (result: AddressResult, allowed: (status: number) => boolean): string[] {
  const other = Object.entries(result.statuses).filter(([status]) => !allowed(Number(status)))
  return other.length === 0 ? [] : [`answers other than expected: ${other.map(([status, count]) => `${int(count)}× ${status}`).join(', ')}`]
}

/** A cheap load beside the flood: every answer 2xx, p99 under CHEAP_P99_MS. */
function cheapPart (key: string, name: string, result: AddressResult, beside: Pick<Measurement, 'peakRssMb' | 'health'>): TogetherPart {
  const problems = otherStatuses(result, is2xx)
  const measurement = measurementOf(result, beside, problems)
  if (measurement.p99 >= CHEAP_P99_MS) problems.push(`p99 ${measurement.p99.toFixed(0)} ms, not under ${CHEAP_P99_MS} ms`)
  return { key, name: `beside the flood, from ${BESIDE}: ${name}`, measurement }
}

const statuses = (result: AddressResult): string =>
  `2xx ${int(statusCount(result, is2xx))}, 503 ${int(result.statuses[503] ?? 0)}, other ${int(statusCount(result, (s) => !is2xx(s) && s !== 503))}`

export const searchFloodRows: RowBuilder = async ({ oracle: reader, wanted, tokens }) => {
  if (!wanted(SEARCH_FLOOD_KEY)) return []
  const oracle = requireOracle(reader, SEARCH_FLOOD_KEY)
  const paths = floodPaths()
  const ids = (await oracle.rows<{ id: string }>('select id::text as id from messages order by random() limit 1000')).map((row) => row.id)
  const callers = await tokens.post('flood')
  const bodies = postBodies()
  const get = (path: string) => ({ method: 'GET' as const, path })

  async function together (child: Server, window: { seconds: number, maxRequests: number }): Promise<TogetherPart[]> {
    const asked: AddressLoad[] = [
      // The flood takes the paths from the start, the bystander from the end: no term is asked twice.
      { address: FLOODER, clients: FLOOD_CLIENTS, next: (n) => n < paths.length ? get(paths[n]!) : undefined },
      { address: BESIDE, clients: 1, next: (n) => get(`/v2/messages/${ids[n % ids.length] ?? 1}`) },
      { address: BESIDE, clients: 1, next: () => get('/v2/messages?limit=25') },
      {
        address: BESIDE,
        clients: 1,
        next: (n) => ({
          method: 'POST',
          path: '/v2/messages',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${callers[n % callers.length]!}` },
          body: bodies[n % bodies.length]!
        })
      },
      { address: BYSTANDER, clients: 1, next: (n) => n < paths.length ? get(paths[paths.length - 1 - n]!) : undefined }
    ]
    // Every client disconnects at the end of the window, answered or not.
    const loads = asked.map((load) => ({ ...load, abandonAtEnd: true }))
    const rss = sampleRss(child.process?.pid)
    const probe = probeHealth(child.base + child.health)
    const results = await runAddressLoads(loads, { base: child.base, seconds: window.seconds, maxRequests: window.maxRequests, timeoutMs: CLIENT_TIMEOUT_MS })
    const [flood, items, pages, creates, bystander] = results as [AddressResult, AddressResult, AddressResult, AddressResult, AddressResult]
    // Every client has disconnected (abandonAtEnd): none of their searches may run a few seconds on.
    await sleep(GONE_AFTER_MS)
    const stillRunning = oracle.live ? await searchesRunning(oracle) : 0
    const beside = { peakRssMb: rss.stop(), health: await probe.stop() }

    const floodProblems = otherStatuses(flood, (s) => is2xx(s) || s === 503)
    if (flood.withoutRetryAfter > 0) floodProblems.push(`${int(flood.withoutRetryAfter)} answers 503 without Retry-After`)
    if (stillRunning > 0) floodProblems.push(`${stillRunning} searches still ran ${GONE_AFTER_MS / 1000} s after every client had disconnected`)
    const bystanderProblems = otherStatuses(bystander, is2xx)
    return [
      {
        key: SEARCH_FLOOD_KEY,
        name: `search flood: ${FLOOD_CLIENTS} clients from ${FLOODER}, a new two-letter term each request (${statuses(flood)}; ${int(flood.abandoned)} left unanswered at the end)`,
        measurement: measurementOf(flood, beside, floodProblems)
      },
      cheapPart(`${SEARCH_FLOOD_KEY}:item`, 'GET /v2/messages/{id}', items, beside),
      cheapPart(`${SEARCH_FLOOD_KEY}:page1`, 'GET /v2/messages page 1', pages, beside),
      cheapPart(`${SEARCH_FLOOD_KEY}:create`, 'POST /v2/messages', creates, beside),
      {
        key: `${SEARCH_FLOOD_KEY}:bystander`,
        name: `beside the flood, from ${BYSTANDER}: one client searching, a new two-letter term each request (${statuses(bystander)})`,
        measurement: measurementOf(bystander, beside, bystanderProblems)
      }
    ]
  }

  return [{ key: SEARCH_FLOOD_KEY, name: 'search flood', targets: ['service'], requests: () => [], together }]
}
