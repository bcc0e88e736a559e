import type { Cursor, SortOrder } from './cursor.js'

// The order of a page (CONTRACT 7): the sort, then the id, ascending whatever the sort's direction, so
// that the order is total and two pages never share or skip an item.

// CONTRACT 7: ties broken by id ascending, whatever the direction of the sort.
export function orderSql (expr: string, order: SortOrder, reversed: boolean): string {
  const desc = (order === 'desc') !== reversed
  if (expr === 'm.id') return desc ? 'm.id DESC' : 'm.id'
  return `${expr}${desc ? ' DESC' : ''}, m.id${reversed ? ' DESC' : ''}`
}

/** The order a seek walks the index in: the requested order after a cursor, its reverse before one. */
export interface Scan { keyDesc: boolean, idDesc: boolean }

export function scanOf (cursor: Cursor, order: SortOrder): Scan {
  return cursor.direction === 'after'
    ? { keyDesc: order === 'desc', idDesc: false }
    : { keyDesc: order !== 'desc', idDesc: true }
}
