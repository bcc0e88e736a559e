import { SizedLru } from '../memory/sized-lru.js'

/**
 * The ordered ids of a result set, remembered with the version of the table they were read at.
 * An entry is only ever served after the caller has read the table's current version in the same
 * snapshot as the page's rows and found it equal (CONTRACT 7), so a write by anyone, anywhere,
 * retires it. Bounded by the number of ids held; the least recently used entries go first.
 */
export interface OrderedIds {
  version: number
  ids: Float64Array
}

export class OrderedIdCache {
  readonly #entries: SizedLru<OrderedIds>

  constructor (maxIds: number) {
    this.#entries = new SizedLru(maxIds)
  }

  get (key: string): OrderedIds | undefined {
    return this.#entries.get(key)
  }

  set (key: string, entry: OrderedIds): void {
    this.#entries.set(key, entry, entry.ids.length)
  }

  delete (key: string): void {
    this.#entries.delete(key)
  }
}

/**
 * Where a cursor by id falls among ids in a page's order (ascending, or descending with `desc`): the
 * number of ids strictly before the id, and of ids up to and including it. A binary search: the ids
 * are distinct and sorted, as a result set ordered by id is.
 */
export function placeId (ids: Float64Array, id: number, desc: boolean): { before: number, through: number } {
  const precedes = (value: number) => desc ? value > id : value < id
  let low = 0
  let high = ids.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (precedes(ids[middle]!)) low = middle + 1
    else high = middle
  }
  return { before: low, through: low < ids.length && ids[low] === id ? low + 1 : low }
}

/**
 * The window of a page by cursor among the ids of its result set in the page's order, and whether any
 * id precedes and follows it: after a cursor, the ids beyond its position (the cursor's own id counts as
 * preceding); before one, the ids ahead of it (its own id counts as following).
 */
export function cursorWindow (ids: Float64Array, id: number, desc: boolean, direction: 'after' | 'before', limit: number): { from: number, to: number, before: boolean, after: boolean } {
  const at = placeId(ids, id, desc)
  if (direction === 'after') {
    const to = Math.min(at.through + limit, ids.length)
    return { from: at.through, to, before: at.through > 0, after: to < ids.length }
  }
  const from = Math.max(0, at.before - limit)
  return { from, to: at.before, before: from > 0, after: at.before < ids.length }
}
