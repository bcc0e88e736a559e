import { sql, type SQL } from 'drizzle-orm'
import type { MessageSort } from '../schemas/messages.js'

/**
 * A term's matching ids in a page's order, read so that PostgreSQL's parallel workers share the pass
 * over the table's pages (drizzle/0015, `search_id_list`). The lists come back unordered, and they are
 * put in order here, where ordering costs least:
 * - by id: one list, sorted as numbers;
 * - by createdAt: one list of ids and one of their times (whole microseconds, exact in a float64), sorted
 *   by time, then id;
 * - by subject or priority: one list per value, the values in the database's own order (its collation,
 *   the enum's order) and each list sorted by id. A collated sort of every match cost much of a common
 *   word's read on a large table (docs/performance.md#search-reads).
 * Ties go by ascending id in both orders, as the page's own order has them (src/pages/order.ts).
 */
export type IdListRow = { version: number, ids: string | null, keys: string | null }

/** The column a sort orders by, beside the id (none for id). */
const SORT_COLUMNS: Record<MessageSort, string | null> = {
  id: null,
  createdAt: 's.created_at',
  priority: 's.priority',
  subject: 's.subject'
}

/** What a sort's lists are keyed by: its column, times as whole microseconds. */
function keyOf (sort: MessageSort): string | null {
  const column = SORT_COLUMNS[sort]
  return sort === 'createdAt' ? `(extract(epoch FROM ${column}) * 1000000)::bigint` : column
}

const grouped = (sort: MessageSort): boolean => sort === 'priority' || sort === 'subject'

/** The columns `matching` (matchingRowsSql) must return for a sort: the id, and the sort's own column. */
export function matchColumns (sort: MessageSort): SQL {
  const column = SORT_COLUMNS[sort]
  return sql.raw(column === null ? 's.id' : `s.id, ${column}`)
}

/**
 * The statement of a term's id lists (each as its integers' text joined by commas: the driver's parsing
 * of a large float8[] held the event loop at once (docs/performance.md#search-reads), and `integers`
 * reads the text in steps), with the table's version read in the same snapshot: one row, or
 * one per value in order for the grouped sorts (a row with null lists when nothing matches).
 */
export function idListsSql (sort: MessageSort, order: 'asc' | 'desc', matching: SQL, version: SQL): SQL {
  const list = (value: string) => sql.raw(`array_to_string(search_id_list(${value}), ',')`)
  const ids = list('s.id')
  const key = keyOf(sort)
  const inner = grouped(sort)
    ? sql`SELECT ${sql.raw(key!)} AS key, ${ids} AS ids, NULL::text AS keys FROM (${matching}) s GROUP BY 1`
    : sql`SELECT NULL AS key, ${ids} AS ids, ${key === null ? sql`NULL::text` : list(key)} AS keys FROM (${matching}) s`
  // A single row is left unsorted: sorting it would copy its lists.
  const by = grouped(sort) ? sql.raw(` ORDER BY g.key ${order === 'desc' ? 'DESC' : 'ASC'}`) : sql``
  return sql`SELECT v.version, g.ids, g.keys FROM (SELECT ${version}::float8 AS version) v
    LEFT JOIN LATERAL (${inner}) g ON true${by}`
}

/**
 * The integers of `array_to_string(bigint[], ',')`, a step at a time. Each is exact in a float64 below
 * 2^53: ids, and times in microseconds until the year 2255.
 */
async function integers (text: string | null): Promise<Float64Array> {
  if (text === null || text === '') return new Float64Array(0)
  let count = 1
  for (let at = text.indexOf(','); at !== -1; at = text.indexOf(',', at + 1)) count++
  const values = new Float64Array(count)
  let i = 0
  let value = 0
  let sign = 1
  for (let at = 0; at <= text.length; at++) {
    const code = at < text.length ? text.charCodeAt(at) : COMMA
    if (code === COMMA) {
      values[i++] = sign * value
      value = 0
      sign = 1
      if (i % STEP === 0) await yieldToLoop()
    } else if (code === MINUS) {
      sign = -1
    } else {
      value = value * 10 + code - ZERO
    }
  }
  return values
}

const COMMA = 44
const MINUS = 45
const ZERO = 48

// Ordering 750,000 ids takes a few hundred milliseconds of CPU; between its steps the event loop runs, so
// that no request waits for all of it at once and the loop's delay stays short of load shedding's limit.
const STEP = 131_072
const yieldToLoop = async (): Promise<void> => { await new Promise((resolve) => setImmediate(resolve)) }

/** The ids of `idListsSql`'s rows in the page's order. */
export async function orderedIds (rows: IdListRow[], sort: MessageSort, order: 'asc' | 'desc'): Promise<Float64Array> {
  if (grouped(sort)) {
    const lists: Float64Array[] = []
    for (const row of rows) {
      lists.push((await integers(row.ids)).sort())
      await yieldToLoop()
    }
    const all = new Float64Array(lists.reduce((sum, list) => sum + list.length, 0))
    let at = 0
    for (const list of lists) {
      all.set(list, at)
      at += list.length
    }
    return all
  }
  const ids = await integers(rows[0]?.ids ?? null)
  const sorted = ids.slice().sort()
  if (sort === 'id') return order === 'desc' ? sorted.reverse() : sorted
  await yieldToLoop()
  return await byKeyThenId(ids, sorted, await integers(rows[0]?.keys ?? null), order === 'desc')
}

/**
 * `ids` ordered by their `keys` (in `desc` order or ascending), then by ascending id, with the engine's
 * own numeric sort rather than a comparator, which took longer (docs/performance.md#search-reads): each id becomes the number
 * keyRank × n + idRank, exact in a float64 while n² < 2^53 (n < 94,906,265).
 */
async function byKeyThenId (ids: Float64Array, sortedIds: Float64Array, keys: Float64Array, desc: boolean): Promise<Float64Array> {
  const n = ids.length
  if (n * n >= 2 ** 53) {
    const positions = Uint32Array.from(ids.keys()).sort((a, b) => (desc ? keys[b]! - keys[a]! : keys[a]! - keys[b]!) || ids[a]! - ids[b]!)
    return Float64Array.from(positions, (position) => ids[position]!)
  }
  const distinct = distinctSorted(keys.slice().sort())
  await yieldToLoop()
  const composite = new Float64Array(n)
  for (let from = 0; from < n; from += STEP) {
    for (let i = from; i < Math.min(from + STEP, n); i++) {
      const keyRank = rankOf(distinct, keys[i]!)
      composite[i] = (desc ? distinct.length - 1 - keyRank : keyRank) * n + rankOf(sortedIds, ids[i]!)
    }
    await yieldToLoop()
  }
  composite.sort()
  await yieldToLoop()
  return composite.map((value) => sortedIds[value % n]!)
}

function distinctSorted (values: Float64Array): Float64Array {
  let count = 0
  for (let i = 0; i < values.length; i++) {
    if (i === 0 || values[i] !== values[count - 1]) values[count++] = values[i]!
  }
  return values.subarray(0, count)
}

/** The position of `value` in `sorted`, which holds it. */
function rankOf (sorted: Float64Array, value: number): number {
  let low = 0
  let high = sorted.length - 1
  while (low < high) {
    const middle = (low + high) >>> 1
    if (sorted[middle]! < value) low = middle + 1
    else high = middle
  }
  return low
}
