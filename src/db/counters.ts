import { sql, type SQL } from 'drizzle-orm'
import { VERSION_TIMELINE_SQL } from './failover/history.js'

// The trigger-maintained counters of drizzle/0006 (`pagination_counts`): each writer adds to its own
// slot, so a counter is the sum of its slots. Written into each statement rather than called as a
// function, so that it is planned once with the statement that reads it.

export const tableLiteral = (table: string): SQL => sql.raw(`'${table}'`)

/** The exact number of rows under counter `key`: the sum of its writers' slots. */
export function countedTotalSql (table: string, key: SQL): SQL {
  return sql`(SELECT coalesce(sum(c.n), 0) FROM pagination_counts c
    WHERE c.table_name = ${tableLiteral(table)} AND c.key = ${key} AND c.dim = 'total' AND c.bucket = 0)`
}

/**
 * The table's version: it grows with every row any statement writes, and never repeats, not even
 * across a failover that lost writes (the counts then come back with other rows under them): the
 * timeline is its high bits (src/db/failover/history.ts), so no state read on one history matches
 * a version read on another.
 */
export function versionSql (table: string): SQL {
  return sql`((SELECT coalesce(sum(c.writes), 0) FROM pagination_counts c
    WHERE c.table_name = ${tableLiteral(table)} AND c.key = '' AND c.dim = 'total' AND c.bucket = 0) + ${VERSION_TIMELINE_SQL})`
}
