/**
 * The correctness checks of the answers: a page against its exact expectation from the oracle
 * (bench/checks/reference-sql.ts), sampled bodies under load, and the writes acknowledged against the rows added.
 */
import { EVERYTHING, type Oracle, type Where } from './reference-sql.js'
import { pageQuery } from './path-queries.js'

export type Item = Record<string, unknown>

export interface PageExpectation {
  page: number
  limit: number
  total: number
  /** The exact ids of the page, from a naive query run before the row. */
  ids: number[]
  /** Pages read while rows are written: the stated total may be anything from `total` up to this. */
  totalUpTo?: number
  /** Checks the content of the items; returns a problem or undefined. */
  items?: (data: Item[]) => string | undefined
}

/** A check of a Platformatic peer's answer, which sees the headers: a page's total is a header there. */
export type PeerVerify = (body: string, headers: Record<string, string | undefined>) => string | undefined

// Every Nth response body is parsed and checked; all of them would slow the load generator.
export const VERIFY_EVERY = 20

export function parseJson (body: string): unknown {
  try {
    return JSON.parse(body)
  } catch {
    return undefined
  }
}

export function pageProblem (body: string, expect: PageExpectation): string | undefined {
  const parsed = parseJson(body) as { data?: unknown, pagination?: Record<string, unknown> } | undefined
  if (parsed === undefined) return `body is not JSON: ${body.slice(0, 80)}`
  const { data, pagination } = parsed
  if (!Array.isArray(data) || pagination === undefined) return `not a page: ${body.slice(0, 80)}`
  // Under writes the total grows while the row runs: any total the table had meanwhile is exact.
  const stated = pagination.total
  const total = expect.totalUpTo !== undefined && typeof stated === 'number' && stated >= expect.total && stated <= expect.totalUpTo ? stated : expect.total
  const want = { page: expect.page, limit: expect.limit, total, totalPages: Math.ceil(total / expect.limit) }
  for (const [key, value] of Object.entries(want)) {
    if (pagination[key] !== value) return `pagination.${key} is ${String(pagination[key])}, expected ${value}`
  }
  const ids = (data as Item[]).map((item) => Number(item.id))
  if (ids.join(',') !== expect.ids.join(',')) return `ids ${ids.slice(0, 3).join(',')}… are not the expected ${expect.ids.slice(0, 3).join(',')}… (${ids.length} of ${expect.ids.length})`
  return expect.items?.(data as Item[])
}

export function sampled (verify: (body: string) => string | undefined, problems: string[]): (body: string) => boolean {
  let seen = 0
  return (body) => {
    if (seen++ % VERIFY_EVERY !== 0) return true
    const problem = verify(body)
    if (problem !== undefined && problems.length < 3) problems.push(`sampled body: ${problem}`)
    return problem === undefined
  }
}

export async function checkPage (base: string, path: string, expect: PageExpectation): Promise<string | undefined> {
  const response = await fetch(base + path, { signal: AbortSignal.timeout(30_000) })
  const body = await response.text()
  if (response.status !== 200) return `${path} answered ${response.status}: ${body.slice(0, 80)}`
  const problem = pageProblem(body, expect)
  return problem === undefined ? undefined : `${path}: ${problem}`
}

/** A peer's page, fetched once outside the load and checked with its headers. */
export async function checkPeerPage (base: string, path: string, verify: PeerVerify): Promise<string | undefined> {
  const response = await fetch(base + path, { signal: AbortSignal.timeout(30_000) })
  const body = await response.text()
  if (response.status !== 200) return `${path} answered ${response.status}: ${body.slice(0, 80)}`
  const problem = verify(body, Object.fromEntries(response.headers))
  return problem === undefined ? undefined : `${path}: ${problem}`
}

/** The naive reference for a page: total and ids by one plain query each (bench/checks/reference-sql.ts). */
export async function expectPage (oracle: Oracle, where: Where, page: number, limit: number, items?: PageExpectation['items'], orderBy = 'id'): Promise<PageExpectation> {
  const total = await oracle.count(where)
  const ids = await oracle.ids(where, orderBy, limit, (page - 1) * limit)
  return { page, limit, total, ids, items }
}

/** The messages whose content or subject contains `term`, as the search endpoint matches them. */
export const searchWhere = (term: string): Where => pageQuery(`/v2/messages/search?q=${encodeURIComponent(term)}`).where

/** The exact answer to a list or search path (bench/checks/path-queries.ts). */
export async function expectPath (oracle: Oracle, path: string): Promise<PageExpectation> {
  const query = pageQuery(path)
  return await expectPage(oracle, query.where, query.page, query.limit, undefined, query.orderBy)
}

/** Wraps a body check so that it also records the id of every acknowledged (created) message. */
export function withAcknowledged (verify: (body: string) => boolean, ids: number[] | undefined): (body: string) => boolean {
  if (ids === undefined) return verify
  return (body) => {
    // A number from the service and the baseline, a string of digits from the Platformatic peer (a bigint).
    const id = (parseJson(body) as Item | undefined)?.id
    if (typeof id === 'number' || (typeof id === 'string' && /^\d+$/.test(id))) ids.push(Number(id))
    return verify(body)
  }
}

/**
 * Zero lost writes: every message acknowledged (201; the Platformatic peer's 200) is in the table, and the rows added exceed the
 * acknowledgements by at most the requests still in flight when the load stopped (one per connection).
 */
export async function lostWrites (oracle: Oracle, acknowledged: number[], added: number, connections: number): Promise<string[]> {
  const problems: string[] = []
  const found = await oracle.present(acknowledged)
  if (found !== acknowledged.length) problems.push(`${acknowledged.length - found} of ${acknowledged.length} acknowledged messages are missing`)
  if (added < acknowledged.length || added > acknowledged.length + connections) {
    problems.push(`${acknowledged.length} messages acknowledged but ${added} rows added`)
  }
  return problems
}

/** Writes the oracle cannot see while the service runs (the embedded database), checked once it has stopped. */
export interface DeferredWrites { row: string, acknowledged: number[], added: number, connections: number }

/** The message count as the service states it (the total of a list page), for a database only it can read. */
export async function statedTotal (base: string): Promise<number> {
  const page = await (await fetch(`${base}/v2/messages?limit=1`)).json() as { pagination: { total: number } }
  return page.pagination.total
}

/** The message count: from the oracle when it sees the service's writes, else as the service states it. */
export async function messageCount (oracle: Oracle, base: string): Promise<number> {
  return oracle.live ? await oracle.count(EVERYTHING) : await statedTotal(base)
}
