import { sql, type SQL } from 'drizzle-orm'
import { countedTotalSql } from '../db/counters.js'
import { countedTotalColumn, itemsSql } from './items.js'
import { locateSql } from './locate.js'
import { BEFORE_FIRST_ID } from './seek.js'
import type { SortOrder } from './cursor.js'
import { placeholder, type CollectionSpec, type GroupRank } from './spec.js'

// Unfiltered deep pages of a sort with few distinct keys (a priority, a subject), located group by group: the
// distinct keys are walked through the (key, id) index in the page's order, one index probe each; the
// groups' totals, from their counters, tell which group holds the offset; inside a group the order is
// by id ascending (CONTRACT 7's tie-break), located in that group's id buckets (./locate.ts). The page
// may run on into the next groups, read from their first ids. One statement, one snapshot: the keys,
// the counts and the rows agree, so the page is exact under any writer.

/** The most distinct keys walked: past it, the statement says so and the page is read another way. */
export const MAX_GROUPS = 256

/**
 * A deep page of `sort` (unfiltered), located group by group, reading `reach` rows (at least the
 * page's limit: src/pages/reach.ts). Its first row carries `complete`: false when the column has more
 * than MAX_GROUPS distinct keys, and then no page row.
 */
export function groupedSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, group: GroupRank, order: SortOrder, reach: number): SQL {
  const desc = order === 'desc'
  const dir = sql.raw(desc ? 'DESC' : 'ASC')
  const column = sql.raw(spec.sorts[sort])
  const table = sql.raw(spec.table)
  const step = sql.raw(desc ? '<' : '>')
  const keyed = (value: string): string => group.key.replaceAll('$v', value)
  const keyOf = (value: string): SQL => sql.raw(group.noneKey === undefined ? keyed(value) : `coalesce(${keyed(value)}, '${group.noneKey}')`)
  // NULL keys sort last ascending and first descending (PostgreSQL's default, as ./order.ts leaves it).
  const none = group.noneKey === undefined ? sql`` : sql` UNION ALL SELECT NULL, ${sql.raw(desc ? '0' : String(MAX_GROUPS + 2))}`
  const offset = sql`${placeholder('offset')}::bigint`
  const limit = sql`${placeholder('limit')}::bigint`
  // Row counts are constants, so that PostgreSQL keeps a generic plan (./locate.ts): with the limit as a
  // parameter it planned this statement on every page, about as long as running it
  // (docs/performance.md#page-statements-and-their-plans). The skip into the first group is under one
  // level-0 bucket (256 ids).
  const rowsOf = (match: SQL): SQL => sql`(SELECT m.id FROM ${table} m WHERE ${match}
        AND m.id >= CASE WHEN g.pos = (SELECT pos FROM target) THEN (SELECT bucket FROM loc) << 8 ELSE ${sql.raw(BEFORE_FIRST_ID)} END
        ORDER BY m.id LIMIT ${sql.raw(String(reach + 255))})`
  // A column without NULLs has no group of rows without a value to read.
  const groupRows = group.noneKey === undefined
    ? rowsOf(sql`${column} = g.v`)
    : sql`${rowsOf(sql`g.v IS NOT NULL AND ${column} = g.v`)} UNION ALL ${rowsOf(sql`g.v IS NULL AND ${column} IS NULL`)}`
  return sql`WITH RECURSIVE walked AS (
      (SELECT ${column} AS v, 1 AS pos FROM ${table} m WHERE ${column} IS NOT NULL ORDER BY ${column} ${dir} LIMIT 1)
      UNION ALL
      SELECT (SELECT ${column} FROM ${table} m WHERE ${column} ${step} w.v ORDER BY ${column} ${dir} LIMIT 1), w.pos + 1
      FROM walked w WHERE w.v IS NOT NULL AND w.pos <= ${sql.raw(String(MAX_GROUPS))}),
    complete AS MATERIALIZED (SELECT count(*) <= ${sql.raw(String(MAX_GROUPS))} AS ok FROM walked WHERE v IS NOT NULL),
    groups AS MATERIALIZED (
      SELECT k.v, k.pos, ${countedTotalSql(spec.table, keyOf('k.v'))} AS n
      FROM (SELECT v, pos FROM walked WHERE v IS NOT NULL${none}) k
      WHERE (SELECT ok FROM complete)),
    placed AS MATERIALIZED (SELECT v, pos, n, (sum(n) OVER (ORDER BY pos) - n)::bigint AS before FROM groups WHERE n > 0),
    target AS MATERIALIZED (
      SELECT v, pos, (${offset} - before)::bigint AS rem FROM placed WHERE before + n > ${offset} ORDER BY pos LIMIT 1),
    ${locateSql(spec.table, sql`(SELECT ${keyOf('v')} FROM target)`, 'id', sql`(SELECT rem FROM target)`, false)},
    page AS MATERIALIZED (
      SELECT x.id, row_number() OVER (ORDER BY x.pos, x.id) AS ord FROM (
        SELECT g.pos, s.id FROM placed g CROSS JOIN LATERAL (
          ${groupRows}) s
        WHERE g.pos >= (SELECT pos FROM target) AND g.before < ${offset} + ${limit}) x
      ORDER BY x.pos, x.id OFFSET (SELECT skip FROM loc) LIMIT ${sql.raw(String(reach))})
    SELECT t.total, t.complete, r.* FROM (SELECT ${countedTotalColumn(spec)}, (SELECT ok FROM complete) AS complete) t
    ${itemsSql(spec, sort, sql`page.ord <= (SELECT skip FROM loc) + ${limit}`)}`
}
