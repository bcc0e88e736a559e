import { sql, type SQL } from 'drizzle-orm'
import { whereSql } from './filters.js'
import { itemsSql, pageSlice, totalSql } from './items.js'
import { orderSql } from './order.js'
import type { SortOrder } from './cursor.js'
import { seekPageSql } from './seek.js'
import { placeholder, type CollectionSpec } from './spec.js'

// Pages by number that are read by walking: near the start, where the walk is as cheap as any other
// read (or, descending by a sort with long runs of ties, a seek from the start), and deep pages with
// neither anchors nor ranks to seek from, walked from the nearer end.

// Below this offset a page is read by walking the index from the start: as cheap as locating it.
export const NEAR_START = 1000

export function pageIdsSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, order: SortOrder, present: F[]): SQL {
  const by = orderSql(spec.sorts[sort], order, false)
  return sql`page AS MATERIALIZED (
      SELECT m.id, row_number() OVER (ORDER BY ${sql.raw(by)}) AS ord FROM ${sql.raw(spec.table)} m
      WHERE ${whereSql(spec, present)} ORDER BY ${sql.raw(by)} OFFSET ${placeholder('offset')}::bigint LIMIT ${placeholder('limit')}::bigint)`
}

/**
 * A page by walking OFFSET rows, and its total, in one statement and one snapshot. The walk starts
 * from whichever end of the index is nearer, which depends on the total: read in a statement of its
 * own, a write between the two moved every page read from the end by the rows it wrote. Only one of
 * the two walks runs (the other's condition is false before it reads a row); rows from the end are
 * numbered negatively, so that the page still comes out in its order.
 */
export function walkedSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, order: SortOrder, present: F[]): SQL {
  const table = sql.raw(spec.table)
  const where = whereSql(spec, present)
  const offset = sql`${placeholder('offset')}::bigint`
  const limit = sql`${placeholder('limit')}::bigint`
  const fromEnd = sql`(SELECT t.total::bigint FROM t) - ${offset} - ${limit}`
  const by = orderSql(spec.sorts[sort], order, false)
  const back = orderSql(spec.sorts[sort], order, true)
  return sql`WITH t AS MATERIALIZED (${totalSql(spec, present)}),
    ahead AS MATERIALIZED (
      SELECT m.id, row_number() OVER (ORDER BY ${sql.raw(by)}) AS ord FROM ${table} m
      WHERE ${fromEnd} >= ${offset} AND ${where} ORDER BY ${sql.raw(by)} OFFSET ${offset} LIMIT ${limit}),
    behind AS MATERIALIZED (
      SELECT m.id, -row_number() OVER (ORDER BY ${sql.raw(back)}) AS ord FROM ${table} m
      WHERE ${fromEnd} < ${offset} AND ${where} ORDER BY ${sql.raw(back)}
      OFFSET greatest(${fromEnd}, 0) LIMIT greatest(least(${limit}, (SELECT t.total::bigint FROM t) - ${offset}), 0)),
    page AS (SELECT id, ord FROM ahead UNION ALL SELECT id, ord FROM behind)
    SELECT t.total, r.* FROM t
    ${itemsSql(spec, sort, sql`true`)}`
}

/** A page near the start and its total, in one statement and one snapshot. */
export function nearStartSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, order: SortOrder, present: F[]): SQL {
  return sql`WITH ${pageIdsSql(spec, sort, order, present)}
    SELECT t.total, r.* FROM (${totalSql(spec, present)}) t
    ${itemsSql(spec, sort, sql`true`)}`
}

/**
 * A descending page near the start of a sort with long runs of ties (CollectionSpec.grouped), and its
 * total, in one statement: the first `reach` rows sought from before the first one, as a page by
 * cursor is (./seek.ts), visiting the runs one at a time through the (key, id) index, and the page
 * `skip` rows in. Descending, NULL keys come first, so the start is a NULL key below every id (`i`).
 * Walked, ties running by id ascending against the index, the first page sorted a whole run: by
 * subject, every message without one (docs/performance.md#page-statements-and-their-plans).
 */
export function startSoughtSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, present: F[], reach: number): SQL {
  return sql`${seekPageSql(spec, sort, { keyDesc: true, idDesc: false }, true, present, reach)}
    SELECT t.total, r.* FROM (${totalSql(spec, present)}) t
    ${itemsSql(spec, sort, pageSlice)}`
}
