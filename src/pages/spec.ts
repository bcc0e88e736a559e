import { sql, type SQL } from 'drizzle-orm'
import type { ChangeLog } from '../db/change-log.js'

// What a collection declares to be read as pages (src/pages/reader.ts): its rows, its sorts and their
// keys, its filters and which of them the counters of drizzle/0006 count, and the sorts the
// order-statistic buckets rank. Everything else about reading a page is shared.

/** The sort-key dimensions the triggers keep buckets for. */
export type RankedDim = 'id' | 'created'

export interface FilterSpec {
  /** The condition on alias `m`, reading the value from the placeholder named like the filter. */
  condition: SQL
  /** The counter key of a value, when the triggers count this filter (src/db/triggers/counter-keys.ts). */
  key?: (value: string | number) => string
  /** A value the column cannot hold matches no row, and needs no query (SPEC 4.9 rule 2). */
  matchesNothing?: (value: string | number) => boolean
}

/**
 * How a sort key is carried in a cursor: as text PostgreSQL renders and reads back exactly. Timestamps
 * travel as epoch microseconds (the API shows milliseconds; the column holds microseconds).
 */
export type KeyType = 'id' | 'text' | 'integer' | 'numeric' | 'timestamptz' | { enum: string, values: readonly string[] }

export interface CollectionSpec<S extends string, F extends string> {
  table: string
  /** Row source, aliased `m`, joined to whatever the items show. */
  from: SQL
  /** Select list of an item, typed so both drivers parse it alike. */
  columns: SQL
  /** ORDER BY expression of each sort field, before the id tie-break. */
  sorts: Record<S, string>
  /** The type of each sort's key; `id` for the sort by id itself. */
  keys: Record<S, KeyType>
  /**
   * Sorts with few distinct keys (long runs of ties). Their descending seeks, whose ties still run by
   * id ascending, visit the runs one at a time through the index instead of sorting a whole run.
   */
  grouped?: readonly S[]
  /**
   * For a grouped sort, the filters whose value leads an index before its key, as (filter, key, id):
   * under them, a walk of the runs reads only the result set's index entries. Unfiltered or under these
   * alone, a descending page near the start is sought run by run (./numbered.ts) instead of sorted.
   */
  walkFilters?: Partial<Record<S, readonly F[]>>
  filters: Record<F, FilterSpec>
  /** Sorts located through the order-statistic index, and the filter whose values rank too. */
  ranked: { dims: Partial<Record<S, RankedDim>>, filter?: F }
  /** Sorts whose unfiltered deep pages are located group by group (./grouped.ts), with their groups' counter keys. */
  groupRanked?: Partial<Record<S, GroupRank>>
  /**
   * The table's change log, when it has one: anchors then follow the rows created since they were
   * read (src/pages/anchors/) instead of being retired by the first write.
   */
  changes?: ChangeLog
}

export type FilterValues<F extends string> = Partial<Record<F, string | number>>

/**
 * The counter key of each group of a sort (drizzle/0006, drizzle/0017): `key` is an SQL expression of
 * the group's value, written `$v`, as the triggers compute it; `noneKey` is the key of the rows without
 * a value, for a column that can be NULL.
 */
export interface GroupRank { key: string, noneKey?: string }

export const placeholder = (name: string) => sql.placeholder(name)

/** A timestamptz column as the API's ISO-8601 text, rendered by PostgreSQL so no Date is built per row. */
export const isoTimestamp = (column: string): string => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

/** A value read with a page in place of its total, named for the statement that reads it. */
export interface Companion { name: string, sql: SQL }

/** The values a page statement reads beside its items, removed from the rows before they are answered. */
export interface PageRow { total?: number, ord?: number, cursor_key?: string | null, other?: boolean, version?: number, complete?: boolean }
