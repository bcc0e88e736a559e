import { sql, type SQL } from 'drizzle-orm'
import { whereSql } from './filters.js'
import { itemsSql, pageSlice } from './items.js'
import { keyParamSql } from './keys.js'
import type { Scan } from './order.js'
import { placeholder, type CollectionSpec } from './spec.js'

// Seeks: the rows strictly beyond a position (a cursor's, or an anchor's) in the (key, id) order of an
// index, read in the statement that reads everything else the page needs. A position stays valid after
// its item is deleted, so a page by cursor never repeats or skips an item whatever was written since.

/** An id below every id: the position before the first row of a NULL key, for a seek from the start. */
export const BEFORE_FIRST_ID = '-9223372036854775807'

/**
 * One index range of a seek, in scan order: `where` its rows, `order` their order. A `walk` part is a
 * run of groups of equal keys, each read by id (see `grouped`).
 */
export interface SeekPart { where: SQL, order: string, walk?: boolean }

/** The parts of the rows strictly beyond a position, in scan order, reading the id from `idName`. */
export function seekParts<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, scan: Scan, keyNull: boolean, idName: string): SeekPart[] {
  const { keyDesc, idDesc } = scan
  const id = sql`${placeholder(idName)}::bigint`
  const type = spec.keys[sort]
  if (type === 'id') return [{ where: sql`m.id ${sql.raw(keyDesc ? '<' : '>')} ${id}`, order: `m.id${keyDesc ? ' DESC' : ''}` }]
  const x = sql.raw(spec.sorts[sort])
  const key = keyParamSql(type)
  const beyond = sql.raw(keyDesc ? '<' : '>')
  const idBeyond = sql.raw(idDesc ? '<' : '>')
  const byKey = `${spec.sorts[sort]}${keyDesc ? ' DESC' : ''}, m.id${idDesc ? ' DESC' : ''}`
  const byId = `m.id${idDesc ? ' DESC' : ''}`
  // Key and id in the same direction: one row comparison, a single range of the (key, id) index.
  // Otherwise the rest of the cursor's group by id, then the groups beyond it.
  const mixed = keyDesc !== idDesc
  const walk = mixed && spec.grouped?.includes(sort) === true
  // PostgreSQL puts NULL keys last in ascending order and first in descending order. Among NULL keys
  // the order is by id; said as the (key, id) index's own order where it has one direction, so that
  // the index, not the primary key filtered for NULLs, reads them.
  const byNull = mixed ? byId : byKey
  const parts: SeekPart[] = []
  if (!keyNull) {
    if (!mixed) parts.push({ where: sql`(${x}, m.id) ${beyond} (${key}, ${id})`, order: byKey })
    else {
      parts.push({ where: sql`${x} = ${key} AND m.id ${idBeyond} ${id}`, order: byId })
      parts.push({ where: sql`${x} ${beyond} ${key}`, order: byKey, walk })
    }
    if (!keyDesc) parts.push({ where: sql`${x} IS NULL`, order: byNull })
  } else {
    parts.push({ where: sql`${x} IS NULL AND m.id ${idBeyond} ${id}`, order: byNull })
    if (keyDesc) parts.push({ where: sql`${x} IS NOT NULL`, order: byKey, walk })
  }
  return parts
}

/**
 * The groups of equal keys a walk part visits, one index probe each, until they hold a page: the
 * first beyond the cursor's group, then each next one. `prior` is the part before it.
 */
export function walkSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, scan: Scan, first: SQL, prior: SQL, present: F[], limit: SQL): SQL {
  const x = spec.sorts[sort]
  const table = sql.raw(spec.table)
  const where = whereSql(spec, present)
  const next = (bound: SQL) => sql`(SELECT ${sql.raw(x)} AS k FROM ${table} m WHERE ${bound} AND ${where}
    ORDER BY ${sql.raw(x)}${sql.raw(scan.keyDesc ? ' DESC' : '')} LIMIT 1)`
  const size = sql`(SELECT count(*) AS n FROM (SELECT 1 FROM ${table} m WHERE ${sql.raw(x)} = f.k AND ${where} LIMIT ${limit}) z)`
  return sql`walk(k, got, step) AS (
      SELECT f.k, s.n + c.n, 1 FROM (SELECT count(*) AS n FROM (SELECT 1 FROM ${table} m WHERE ${prior} AND ${where} LIMIT ${limit}) z) s
        CROSS JOIN LATERAL ${next(first)} f CROSS JOIN LATERAL ${size} c
      WHERE s.n < ${limit}
      UNION ALL
      SELECT f.k, w.got + c.n, w.step + 1 FROM walk w
        CROSS JOIN LATERAL ${next(sql`${sql.raw(x)} ${sql.raw(scan.keyDesc ? '<' : '>')} w.k`)} f CROSS JOIN LATERAL ${size} c
      WHERE w.got < ${limit})`
}

/** Options of a numbered part: `tagged` adds the part's number (`part`), `key` the row's sort key (`k`). */
export interface NumberedOptions { tagged?: boolean, key?: boolean }

/**
 * The parts of a seek as statements of their rows, each numbered `po` in the part's own order and at
 * most `partLimit` of them; and the `walk` CTE a walk part reads (see `grouped`), which the statement
 * must define (WITH RECURSIVE) when there is one. `reach` bounds what a walk visits.
 */
export function numberedParts<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, scan: Scan, parts: readonly SeekPart[], present: F[], reach: number) {
  const table = sql.raw(spec.table)
  const where = whereSql(spec, present)
  const limit = sql.raw(String(reach))
  const byId = `m.id${scan.idDesc ? ' DESC' : ''}`
  const at = parts.findIndex((part) => part.walk === true)
  const walk = at < 1 ? undefined : walkSql(spec, sort, scan, parts[at]!.where, parts[at - 1]!.where, present, limit)
  const numbered = (n: number, partLimit: SQL, options: NumberedOptions = {}): SQL => {
    const part = parts[n]!
    const tag = options.tagged === true ? sql`${n} AS part, ` : sql``
    if (part.walk === true) {
      const key = options.key === true ? sql`w.k AS k, ` : sql``
      const walked = `p.id${scan.idDesc ? ' DESC' : ''}`
      return sql`SELECT ${tag}${key}p.id, row_number() OVER (ORDER BY w.step, ${sql.raw(walked)}) AS po FROM walk w
        CROSS JOIN LATERAL (SELECT m.id FROM ${table} m WHERE ${sql.raw(spec.sorts[sort])} = w.k AND ${where}
          ORDER BY ${sql.raw(byId)} LIMIT ${limit}) p
        ORDER BY w.step, ${sql.raw(walked)} LIMIT ${partLimit}`
    }
    const key = options.key === true ? sql`${sql.raw(spec.sorts[sort])} AS k, ` : sql``
    return sql`SELECT ${tag}${key}m.id, row_number() OVER (ORDER BY ${sql.raw(part.order)}) AS po FROM ${table} m
      WHERE ${part.where} AND ${where} ORDER BY ${sql.raw(part.order)} LIMIT ${partLimit}`
  }
  return { walk, numbered }
}

/**
 * The CTEs ending in `page(id, ord)`: the first `reach` rows beyond the position (`k`, `i`) in scan
 * order, numbered from 1. `reach` is a constant, not a parameter: with every row count known, the
 * generic plan of the statement costs what a custom one does, so PostgreSQL keeps it and does not
 * plan the statement again on each execution, which took longer than running it
 * (docs/performance.md#page-statements-and-their-plans).
 */
export function seekPageSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, scan: Scan, keyNull: boolean, present: F[], reach: number): SQL {
  const table = sql.raw(spec.table)
  const where = whereSql(spec, present)
  const limit = sql.raw(String(reach))
  const parts = seekParts(spec, sort, scan, keyNull, 'i')
  const only = parts.length === 1 ? parts[0]! : undefined
  if (only !== undefined && only.walk !== true) {
    // One index range: its own order numbers the rows, with no sort of the parts.
    return sql`WITH page AS MATERIALIZED (SELECT m.id, row_number() OVER (ORDER BY ${sql.raw(only.order)}) AS ord FROM ${table} m
      WHERE ${only.where} AND ${where} ORDER BY ${sql.raw(only.order)} LIMIT ${limit})`
  }
  const { walk, numbered } = numberedParts(spec, sort, scan, parts, present, reach)
  const selects = parts.map((_, n) => sql`(${numbered(n, limit, { tagged: true })})`)
  return sql`WITH ${walk === undefined ? sql`` : sql`RECURSIVE ${walk}, `}page AS MATERIALIZED (
      SELECT s.id, row_number() OVER (ORDER BY s.part, s.po) AS ord FROM (${sql.join(selects, sql` UNION ALL `)}) s
      ORDER BY s.part, s.po LIMIT ${limit})`
}

/**
 * A page by cursor, in one statement and one snapshot: up to `limit` rows beyond the cursor in scan
 * order (the caller asks one more than the page to learn whether more follow), whether any row lies
 * the other way (from the position beside the cursor, so the cursor's own item counts), and the total.
 */
export function seekSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, scan: Scan, keyNull: boolean, present: F[], total: SQL, reach: number): SQL {
  const table = sql.raw(spec.table)
  const where = whereSql(spec, present)
  const back = { keyDesc: !scan.keyDesc, idDesc: !scan.idDesc }
  // Ordered like the index, so that even a generic plan probes it rather than scanning the table.
  const other = seekParts(spec, sort, back, keyNull, 'ci').map((part) =>
    sql`EXISTS (SELECT 1 FROM ${table} m WHERE ${part.where} AND ${where} ORDER BY ${sql.raw(part.order)} LIMIT 1)`)
  return sql`${seekPageSql(spec, sort, scan, keyNull, present, reach)}
    SELECT t.total, x.other, r.* FROM (${total}) t CROSS JOIN (SELECT ${sql.join(other, sql` OR `)} AS other) x
    ${itemsSql(spec, sort, pageSlice)}`
}
