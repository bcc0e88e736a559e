import { createHash } from 'node:crypto'
import { sql, type SQL } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { statement, type Statement } from '../db/statement.js'
import type { PageRequest, SortOrder } from '../lib/pagination.js'

// One implementation of reading a page of any collection (CONTRACT 7: exact at any depth, whoever
// writes). Totals come from the trigger-maintained counters of drizzle/0006 when the filters are one
// counted value (or none), else from count(*). Pages whose sort has buckets in the order-statistic
// index are located in it: a few short range reads of bucket counts and a seek, whatever the depth.
// Any other page is read with OFFSET from whichever end of the index is nearer.

/** The sort-key dimensions the triggers keep buckets for. */
export type RankedDim = 'id' | 'created'

export interface FilterSpec {
  /** The condition on alias `m`, reading the value from the placeholder named like the filter. */
  condition: SQL
  /** The counter key of a value, when the triggers count this filter. */
  key?: (value: string | number) => string
  /** A value the column cannot hold matches no row, and needs no query (SPEC 4.9 rule 2). */
  matchesNothing?: (value: string | number) => boolean
}

export interface CollectionSpec<S extends string, F extends string> {
  table: string
  /** Row source, aliased `m`, joined to whatever the items show. */
  from: SQL
  /** Select list of an item, typed so both drivers parse it alike. */
  columns: SQL
  /** ORDER BY expression of each sort field, before the id tie-break. */
  sorts: Record<S, string>
  filters: Record<F, FilterSpec>
  /** Sorts located through the order-statistic index, and the filter whose values rank too. */
  ranked: { dims: Partial<Record<S, RankedDim>>, filter?: F }
}

export type FilterValues<F extends string> = Partial<Record<F, string | number>>

const hashKey = (name: string) => (value: string | number) => `${name}=${createHash('md5').update(String(value)).digest('hex')}`
const plainKey = (name: string) => (value: string | number) => `${name}=${value}`
export { hashKey, plainKey }

export const placeholder = (name: string) => sql.placeholder(name)

/** A timestamptz column as the API's ISO-8601 text, rendered by PostgreSQL so no Date is built per row. */
export const isoTimestamp = (column: string): string => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

// CONTRACT 7: ties broken by id ascending, whatever the direction of the sort.
function orderSql (expr: string, order: SortOrder, reversed: boolean): string {
  const desc = (order === 'desc') !== reversed
  if (expr === 'm.id') return desc ? 'm.id DESC' : 'm.id'
  return `${expr}${desc ? ' DESC' : ''}, m.id${reversed ? ' DESC' : ''}`
}

const BOUNDS: Record<RankedDim, Record<SortOrder, string>> = {
  id: { asc: 'm.id >= (SELECT bucket FROM loc) << 8', desc: 'm.id <= ((SELECT bucket FROM loc) << 8) + 255' },
  created: {
    asc: 'm.created_at >= pagination_time_from((SELECT bucket FROM loc))',
    desc: 'm.created_at <= pagination_time_until((SELECT bucket FROM loc))'
  }
}

interface PageRow { total?: number, ord?: number }

const LEVELS = 4

const tableLiteral = (table: string) => sql.raw(`'${table}'`)

/**
 * The exact number of rows under counter `key`: the sum of its writers' slots. Written into each
 * statement rather than called as a function, so it is planned once with the statement.
 */
export function countedTotalSql (table: string, key: SQL): SQL {
  return sql`(SELECT coalesce(sum(c.n), 0) FROM pagination_counts c
    WHERE c.table_name = ${tableLiteral(table)} AND c.key = ${key} AND c.dim = 'total' AND c.bucket = 0)`
}

/** The table's version: it grows with every row any statement writes, and never repeats. */
export function versionSql (table: string): SQL {
  return sql`(SELECT coalesce(sum(c.writes), 0) FROM pagination_counts c
    WHERE c.table_name = ${tableLiteral(table)} AND c.key = '' AND c.dim = 'total' AND c.bucket = 0)`
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
  for (let level = LEVELS - 1; level >= 0; level--) {
    const counts = sql`SELECT c.bucket, sum(c.n) AS n, sum(sum(c.n)) OVER (ORDER BY c.bucket ${dir}) AS upto
      FROM pagination_counts c WHERE c.table_name = ${tableLiteral(table)} AND c.key = ${key} AND c.dim = ${sql.raw(`'${dim}:${level}'`)}`
    levels.push(level === LEVELS - 1
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

// Below this offset a page is read by walking the index from the start: as cheap as locating it.
const NEAR_START = 1000

export function createCollectionReader<S extends string, F extends string, Row extends object> (spec: CollectionSpec<S, F>) {
  const statements = new Map<string, Statement<Row & PageRow>>()
  const filterNames = Object.keys(spec.filters) as F[]

  function cached (name: string, build: () => SQL): Statement<Row & PageRow> {
    let found = statements.get(name)
    if (found === undefined) {
      found = statement<Row & PageRow>(`${spec.table}_${statements.size}`, build())
      statements.set(name, found)
    }
    return found
  }

  function whereSql (present: F[]): SQL {
    const conditions = present.map((name) => spec.filters[name].condition)
    return conditions.length === 0 ? sql`true` : sql.join(conditions, sql` AND `)
  }

  function totalSql (present: F[]): SQL {
    const only = present.length === 1 ? spec.filters[present[0]!] : undefined
    if (present.length === 0 || only?.key !== undefined) {
      return sql`SELECT ${countedTotalSql(spec.table, sql`${placeholder('key')}::text`)}::float8 AS total`
    }
    return sql`SELECT count(*)::float8 AS total FROM ${sql.raw(spec.table)} m WHERE ${whereSql(present)}`
  }

  function counterKey (present: F[], values: FilterValues<F>): string {
    if (present.length === 0) return ''
    const name = present[0]!
    return spec.filters[name].key?.(values[name]!) ?? ''
  }

  function locatedSql (sort: S, dim: RankedDim, order: SortOrder, present: F[]): SQL {
    const by = orderSql(spec.sorts[sort], order, false)
    return sql`WITH ${locateSql(spec.table, sql`${placeholder('key')}::text`, dim, sql`${placeholder('offset')}::bigint`, order === 'desc')},
      page AS MATERIALIZED (
        SELECT m.id, row_number() OVER (ORDER BY ${sql.raw(by)}) AS ord FROM ${sql.raw(spec.table)} m
        WHERE ${sql.raw(BOUNDS[dim][order])} AND ${whereSql(present)}
        ORDER BY ${sql.raw(by)} OFFSET (SELECT skip FROM loc) LIMIT ${placeholder('limit')}::bigint)
      SELECT t.total, r.* FROM (SELECT ${countedTotalSql(spec.table, sql`${placeholder('key')}::text`)}::float8 AS total) t
      LEFT JOIN LATERAL (SELECT ${spec.columns}, page.ord FROM page JOIN ${spec.from} ON m.id = page.id) r ON true
      ORDER BY r.ord`
  }

  function pageIdsSql (sort: S, order: SortOrder, reversed: boolean, present: F[]): SQL {
    const by = orderSql(spec.sorts[sort], order, reversed)
    return sql`page AS MATERIALIZED (
        SELECT m.id, row_number() OVER (ORDER BY ${sql.raw(by)}) AS ord FROM ${sql.raw(spec.table)} m
        WHERE ${whereSql(present)} ORDER BY ${sql.raw(by)} OFFSET ${placeholder('offset')}::bigint LIMIT ${placeholder('limit')}::bigint)`
  }

  function offsetSql (sort: S, order: SortOrder, reversed: boolean, present: F[]): SQL {
    return sql`WITH ${pageIdsSql(sort, order, reversed, present)}
      SELECT ${spec.columns}, page.ord FROM page JOIN ${spec.from} ON m.id = page.id ORDER BY page.ord`
  }

  /** A page near the start and its total, in one statement and one snapshot. */
  function nearStartSql (sort: S, order: SortOrder, present: F[]): SQL {
    return sql`WITH ${pageIdsSql(sort, order, false, present)}
      SELECT t.total, r.* FROM (${totalSql(present)}) t
      LEFT JOIN LATERAL (SELECT ${spec.columns}, page.ord FROM page JOIN ${spec.from} ON m.id = page.id) r ON true
      ORDER BY r.ord`
  }

  /** The dimension that locates this page, when the sort has one and the filters allow it. */
  function rankedDim (sort: S, present: F[]): RankedDim | undefined {
    const dim = spec.ranked.dims[sort]
    if (dim === undefined) return undefined
    if (present.length === 0) return dim
    return present.length === 1 && present[0] === spec.ranked.filter ? dim : undefined
  }

  function strip (rows: Array<Row & PageRow>): Row[] {
    for (const row of rows) {
      delete row.total
      delete row.ord
    }
    return rows
  }

  return {
    /** The filters present, or null when one of them can match no row at all. */
    present (values: FilterValues<F>): F[] | null {
      const present: F[] = []
      for (const name of filterNames) {
        const value = values[name]
        if (value === undefined) continue
        if (spec.filters[name].matchesNothing?.(value) === true) return null
        present.push(name)
      }
      return present
    },

    counterKey,
    placeholders (present: F[], values: FilterValues<F>): Record<string, unknown> {
      const params: Record<string, unknown> = { key: counterKey(present, values) }
      for (const name of present) params[name] = values[name]
      return params
    },

    async read (db: Database, values: FilterValues<F>, page: PageRequest<S>): Promise<{ rows: Row[], total: number }> {
      const present = this.present(values)
      if (present === null) return { rows: [], total: 0 }
      const shape = present.join(',')
      const params = this.placeholders(present, values)
      if (page.offset < NEAR_START) {
        const run = cached(`start:${page.sort}:${page.order}:${shape}`, () => nearStartSql(page.sort, page.order, present))
        const rows = await run(db, { ...params, offset: page.offset, limit: page.limit })
        const total = rows[0]?.total ?? 0
        // A page past the end has only the total row, with every item column null.
        return { rows: rows[0]?.ord == null ? [] : strip(rows), total }
      }
      const dim = rankedDim(page.sort, present)
      if (dim !== undefined) {
        const run = cached(`located:${page.sort}:${page.order}:${shape}`, () => locatedSql(page.sort, dim, page.order, present))
        const rows = await run(db, { ...params, offset: page.offset, limit: page.limit })
        const total = rows[0]?.total ?? 0
        // A page past the end has only the total row, with every item column null.
        return { rows: rows[0]?.ord == null ? [] : strip(rows), total }
      }
      const [counted] = await cached(`total:${shape}`, () => totalSql(present))(db, params)
      const total = counted?.total ?? 0
      if (page.offset >= total) return { rows: [], total }
      // Read from the nearer end: the last pages of a large set cost what the first ones do.
      const fromEnd = total - page.offset - page.limit
      const reversed = fromEnd < page.offset
      const offset = reversed ? Math.max(0, fromEnd) : page.offset
      const limit = reversed ? Math.min(page.limit, total - page.offset) : page.limit
      const run = cached(`offset:${page.sort}:${page.order}:${reversed}:${shape}`, () => offsetSql(page.sort, page.order, reversed, present))
      const rows = strip(await run(db, { ...params, offset, limit }))
      return { rows: reversed ? rows.reverse() : rows, total }
    }
  }
}

export type CollectionReader<S extends string, F extends string, Row extends object> = ReturnType<typeof createCollectionReader<S, F, Row>>
