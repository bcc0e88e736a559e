import { sql, type SQL } from 'drizzle-orm'
import { countedTotalSql } from '../db/counters.js'
import { whereSql, counted } from './filters.js'
import { keyColumn } from './keys.js'
import { placeholder, type CollectionSpec, type PageRow } from './spec.js'

// The end of every page statement, and where its total comes from. A page's items and its total are
// read by one statement, in one snapshot: a write between two statements could otherwise give a page
// and a total that never existed together (CONTRACT 7).

/** The exact number of rows under the page's counter key, as a column. */
export const countedTotalColumn = <S extends string, F extends string>(spec: CollectionSpec<S, F>): SQL =>
  sql`${countedTotalSql(spec.table, sql`${placeholder('key')}::text`)}::float8 AS total`

/**
 * The end of every page statement: the rows of `page` that `keep` keeps, joined to what an item shows,
 * in page order, beside the one row of values `t` read with them (a page past the end is that row alone).
 */
export const itemsSql = <S extends string, F extends string>(spec: CollectionSpec<S, F>, sort: S, keep: SQL): SQL => sql`LEFT JOIN LATERAL (SELECT ${spec.columns}, ${keyColumn(spec, sort)}, page.ord
      FROM page JOIN ${spec.from} ON m.id = page.id WHERE ${keep}) r ON true
    ORDER BY r.ord`

export function totalSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, present: F[]): SQL {
  if (counted(spec, present)) {
    return sql`SELECT ${countedTotalColumn(spec)}`
  }
  return sql`SELECT count(*)::float8 AS total FROM ${sql.raw(spec.table)} m WHERE ${whereSql(spec, present)}`
}

export function strip<Row extends object> (rows: Array<Row & PageRow>): { rows: Row[], keys: Array<string | null> } {
  const keys: Array<string | null> = []
  for (const row of rows) {
    keys.push(row.cursor_key ?? null)
    delete row.total
    delete row.ord
    delete row.cursor_key
    delete row.other
    delete row.version
    delete row.complete
  }
  return { rows, keys }
}

/** The rows of `page` after the first `skip`, at most `limit` of them. */
export const pageSlice = sql`page.ord > ${placeholder('skip')}::bigint AND page.ord <= ${placeholder('skip')}::bigint + ${placeholder('limit')}::bigint`
