import { sql, type SQL } from 'drizzle-orm'
import { tableLiteral } from '../db/counters.js'
import { BUCKET_LEVELS } from '../db/triggers/counter-keys.js'
import { whereSql } from './filters.js'
import { countedTotalColumn, itemsSql } from './items.js'
import { orderSql } from './order.js'
import type { SortOrder } from './cursor.js'
import { placeholder, type CollectionSpec, type RankedDim } from './spec.js'

// Pages located in the order-statistic index (drizzle/0006): the triggers keep, for each counted key,
// the number of rows in every bucket of 256 ids (or of a span of time) at several levels. A page at any
// offset is found by reading at most 256 counts per level and skipping fewer than 256 rows, and the
// counts and the rows come from the page's own snapshot, so the page is exact under any writer.

const BOUNDS: Record<RankedDim, Record<SortOrder, string>> = {
  id: { asc: 'm.id >= (SELECT bucket FROM loc) << 8', desc: 'm.id <= ((SELECT bucket FROM loc) << 8) + 255' },
  created: {
    asc: 'm.created_at >= pagination_time_from((SELECT bucket FROM loc))',
    desc: 'm.created_at <= pagination_time_until((SELECT bucket FROM loc))'
  }
}

/**
 * CTEs ending in `loc(bucket, skip)`: the level-0 bucket of `dim` that holds the row at `offset`
 * (0-based) under counter `key`, and how many of its rows come first. From the top level down, each
 * level reads the at most 256 bucket counts under the bucket chosen above it and takes the first whose
 * running sum passes the offset. No row when the offset is past the end. Part of the statement that
 * reads the page, so the counts and the rows come from one snapshot.
 */
export function locateSql (table: string, key: SQL, dim: RankedDim, offset: SQL, desc: boolean): SQL {
  const dir = sql.raw(desc ? 'DESC' : 'ASC')
  const levels: SQL[] = []
  for (let level = BUCKET_LEVELS - 1; level >= 0; level--) {
    const counts = sql`SELECT c.bucket, sum(c.n) AS n, sum(sum(c.n)) OVER (ORDER BY c.bucket ${dir}) AS upto
      FROM pagination_counts c WHERE c.table_name = ${tableLiteral(table)} AND c.key = ${key} AND c.dim = ${sql.raw(`'${dim}:${level}'`)}`
    levels.push(level === BUCKET_LEVELS - 1
      ? sql`l${sql.raw(String(level))} AS MATERIALIZED (SELECT g.bucket, (g.upto - g.n)::bigint AS before
          FROM (${counts} GROUP BY c.bucket) g WHERE g.upto > ${offset} ORDER BY g.bucket ${dir} LIMIT 1)`
      : sql`l${sql.raw(String(level))} AS MATERIALIZED (SELECT g.bucket, (p.before + g.upto - g.n)::bigint AS before
          FROM l${sql.raw(String(level + 1))} p CROSS JOIN LATERAL (${counts}
            AND c.bucket BETWEEN p.bucket << 8 AND (p.bucket << 8) + 255 GROUP BY c.bucket) g
          WHERE p.before + g.upto > ${offset} ORDER BY g.bucket ${dir} LIMIT 1)`)
  }
  levels.push(sql`loc AS MATERIALIZED (SELECT bucket, ${offset} - before AS skip FROM l0)`)
  return sql.join(levels, sql`, `)
}

/**
 * A page located in the order-statistic index. Its `page` reads `reach` rows, a constant at least the
 * page's limit (src/pages/reach.ts), and the rows beyond `limit` are dropped before the join: with a
 * LIMIT parameter, the generic plan was priced for an unknown row count and never chosen, and
 * PostgreSQL planned the statement on every execution, which cost more than running it
 * (docs/performance.md#page-statements-and-their-plans).
 */
export function locatedSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, dim: RankedDim, order: SortOrder, present: F[], reach: number): SQL {
  const by = orderSql(spec.sorts[sort], order, false)
  return sql`WITH ${locateSql(spec.table, sql`${placeholder('key')}::text`, dim, sql`${placeholder('offset')}::bigint`, order === 'desc')},
    page AS MATERIALIZED (
      SELECT m.id, row_number() OVER (ORDER BY ${sql.raw(by)}) AS ord FROM ${sql.raw(spec.table)} m
      WHERE ${sql.raw(BOUNDS[dim][order])} AND ${whereSql(spec, present)}
      ORDER BY ${sql.raw(by)} OFFSET (SELECT skip FROM loc) LIMIT ${sql.raw(String(reach))})
    SELECT t.total, r.* FROM (SELECT ${countedTotalColumn(spec)}) t
    ${itemsSql(spec, sort, sql`page.ord <= (SELECT skip FROM loc) + ${placeholder('limit')}::bigint`)}`
}
