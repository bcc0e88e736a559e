/**
 * The correctness checks of the answers: a page against its exact expectation from the oracle
 * (bench/checks/reference-sql.ts), sampled bodies under load, and the writes acknowledged against the rows added.
 */
import { EVERYTHING, type Oracle, type Where } from './reference-sql.js'
import { pageQuery } from './path-queries.js'
import { BenchError } from '../run/bench-error.js'

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
  /**
   * On a target (--target), whose database the benchmark cannot read: `total` and `ids` are not known,
   * and the answer is checked for its shape only (see shapeProblem), in the order `orderBy` names.
   */
  shapeOnly?: { orderBy: string }
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
  if (expect.shapeOnly !== undefined) return shapeProblem(data as Item[], pagination, expect, expect.shapeOnly.orderBy)
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

/** Item members by the SQL column an ORDER BY names, for the keys whose order is the same in JavaScript. */
const ORDERED_MEMBERS: Record<string, string> = { id: 'id', created_at: 'createdAt' }

/**
 * A page checked without the database: its page and limit as asked, a total and a page count that agree,
 * as many items as the limit (fewer on the last page only), integer ids in the order asked for, and the
 * items' own check (a filter, a search term).
 */
function shapeProblem (data: Item[], pagination: Record<string, unknown>, expect: PageExpectation, orderBy: string): string | undefined {
  for (const key of ['page', 'limit'] as const) {
    if (pagination[key] !== expect[key]) return `pagination.${key} is ${String(pagination[key])}, expected ${expect[key]}`
  }
  const { total, totalPages } = pagination
  if (typeof total !== 'number' || !Number.isInteger(total) || total < 0) return `pagination.total is ${String(total)}`
  if (totalPages !== Math.ceil(total / expect.limit)) return `pagination.totalPages is ${String(totalPages)} for a total of ${total}`
  if (data.length > expect.limit) return `${data.length} items on a page of limit ${expect.limit}`
  if (expect.page < Math.ceil(total / expect.limit) && data.length !== expect.limit) return `${data.length} items on page ${expect.page} of ${String(totalPages)}, expected ${expect.limit}`
  if (!data.every((item) => Number.isInteger(item.id))) return 'an item without an integer id'
  const [column, direction] = (orderBy.split(',')[0] ?? '').trim().split(' ')
  const member = ORDERED_MEMBERS[column ?? '']
  if (member !== undefined) {
    const values = data.map((item) => item[member] as number | string)
    const sign = direction === 'desc' ? -1 : 1
    const at = values.findIndex((value, i) => i > 0 && (value < values[i - 1]! ? -1 : value > values[i - 1]! ? 1 : 0) * sign < 0)
    if (at !== -1) return `items out of ${member}${direction === 'desc' ? ' descending' : ''} order at ${at}: ${String(values[at - 1])} then ${String(values[at])}`
  }
  return expect.items?.(data)
}

/**
 * Where a row's expected answers come from: the oracle's exact ones (`exact`), or on a target, whose
 * database the benchmark cannot read, the target's own statement of its totals and a check of the
 * answers' shape.
 */
export interface Answers {
  exact: boolean
  /** The messages a list or search path finds (default: every message). */
  total: (path?: string) => Promise<number>
  /** The answer expected to a list or search path, with `items` as the check of its items. */
  expect: (path: string, items?: PageExpectation['items']) => Promise<PageExpectation>
}

export function oracleAnswers (oracle: Oracle): Answers {
  return {
    exact: true,
    total: async (path) => await oracle.count(path === undefined ? EVERYTHING : pageQuery(path).where),
    expect: async (path, items) => ({ ...await expectPath(oracle, path), items })
  }
}

/** A target's answers: the totals as it states them, every answer checked for its shape (shapeProblem). */
export function statedAnswers (base: string): Answers {
  return {
    exact: false,
    total: async (path) => await statedTotal(base, path),
    expect: async (path, items) => {
      const { page, limit, orderBy } = pageQuery(path)
      return { page, limit, total: 0, ids: [], items, shapeOnly: { orderBy } }
    }
  }
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

/** The message count (or a path's total) as the service states it, for a database only it can read. */
export async function statedTotal (base: string, path = '/v2/messages?limit=1'): Promise<number> {
  const response = await fetch(base + path, { signal: AbortSignal.timeout(30_000) })
  const body = await response.text()
  const total = (parseJson(body) as { pagination?: { total?: unknown } } | undefined)?.pagination?.total
  if (response.status !== 200 || typeof total !== 'number') throw new BenchError(`${path} answered ${response.status}, not a page: ${body.slice(0, 80)}`)
  return total
}

/** The message count: from the oracle when it sees the service's writes, else as the service states it. */
export async function messageCount (oracle: Oracle, base: string): Promise<number> {
  return oracle.live ? await oracle.count(EVERYTHING) : await statedTotal(base)
}
