import { sql, type SQL } from 'drizzle-orm'
import { versionSql } from '../../db/counters.js'
import type { ChangeLog } from '../../db/change-log.js'
import { whereSql } from '../filters.js'
import { countedTotalColumn, itemsSql, pageSlice } from '../items.js'
import { keyTextSql, nearKey } from '../keys.js'
import { orderSql, type Scan } from '../order.js'
import type { SortOrder } from '../cursor.js'
import { seekPageSql } from '../seek.js'
import { placeholder, type CollectionSpec } from '../spec.js'
import { FOLLOW_MAX, STRIDE } from './anchor-set.js'

// The statements of anchored pages: reading a set's anchors in chunks, a page sought from an anchor
// with the table's version (the set serves only pages of its own version), and what the rows created
// since a set was read did to its anchors, counted from the change log in the page's own snapshot.

export interface AnchorChunk { version: number, n: number, keys: string, ids: number[], snap: string, top: number, epoch: number | null }

export interface FollowRow { version: number, followed: boolean, added: number, before: number[] }

export interface FollowedRow { followed: boolean, added: number, before: number }

/**
 * A page `skip` rows beyond an anchor, reading `reach` rows (at least skip plus limit), with the
 * table's version; `withTotal` (for an anchor set still being read, which does not know it) adds the
 * counted total, read in the same snapshot.
 */
export function anchoredSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, scan: Scan, keyNull: boolean, present: F[], withTotal: boolean, reach: number): SQL {
  const total = withTotal ? sql`, ${countedTotalColumn(spec)}` : sql``
  return sql`${seekPageSql(spec, sort, scan, keyNull, present, reach)}
    SELECT t.*, r.* FROM (SELECT ${versionSql(spec.table)}::float8 AS version${total}) t
    ${itemsSql(spec, sort, pageSlice)}`
}

/**
 * CTEs reading what the rows written since an anchor set was read did to it, in the statement's
 * snapshot: `st.followed` when every row written since then was created since then (an id above the
 * highest the set saw: an update or delete of an older row, whose old key the log does not hold,
 * cannot be followed), in no more than FOLLOW_MAX log entries, and the log holds them all; `added`, those of them
 * the result set has now; `ranked`, for each anchor of `near(ord, k, id)`, how many of them sort
 * before it (`before`), compared by PostgreSQL itself, in the sort's collation.
 */
export function followCtes<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, order: SortOrder, present: F[], log: ChangeLog, near: SQL): SQL {
  const table = sql.raw(spec.table)
  const snap = sql`${placeholder('snap')}::pg_snapshot`
  const key = spec.keys[sort] === 'id' ? sql`NULL::text` : sql.raw(spec.sorts[sort])
  const by = orderSql(spec.keys[sort] === 'id' ? 'm.id' : 'm.k', order, false)
  return sql`ok AS MATERIALIZED (SELECT ${log.epoch} = ${placeholder('epoch')}::bigint AND ${log.intact(snap)} AS ok),
    ch AS MATERIALIZED (SELECT c.id FROM (${log.since(snap)}) c WHERE (SELECT ok FROM ok) LIMIT ${sql.raw(String(FOLLOW_MAX + 1))}),
    st AS MATERIALIZED (SELECT (SELECT ok FROM ok) AND count(*) <= ${sql.raw(String(FOLLOW_MAX))}
      AND coalesce(bool_and(ch.id > ${placeholder('top')}::bigint), true) AS followed FROM ch),
    added AS MATERIALIZED (SELECT m.id, ${key} AS k FROM ${table} m
      WHERE m.id IN (SELECT id FROM ch) AND (SELECT followed FROM st) AND ${whereSql(spec, present)}),
    near AS (${near}),
    ranked AS (SELECT m.ord, count(*) FILTER (WHERE m.ord IS NULL) OVER (ORDER BY ${sql.raw(by)}) AS before
      FROM (SELECT NULL::bigint AS ord, k, id FROM added UNION ALL SELECT ord, k, id FROM near) m)`
}

/**
 * Whether the writes since an anchor set was read can be followed, with the table's version, the
 * rows created since in the result set (`added`), and how many of them sort before each candidate
 * anchor (`near`: [key, id] pairs as JSON).
 */
export function followSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, order: SortOrder, present: F[], log: ChangeLog): SQL {
  const near = sql`SELECT a.ord, ${nearKey(spec, sort, sql`(a.v->>0)`)} AS k, (a.v->>1)::bigint AS id
    FROM json_array_elements(${placeholder('near')}::json) WITH ORDINALITY AS a(v, ord)`
  return sql`WITH ${followCtes(spec, sort, order, present, log, near)}
    SELECT ${versionSql(spec.table)}::float8 AS version, (SELECT followed FROM st) AS followed,
      (SELECT count(*) FROM added)::float8 AS added,
      (SELECT coalesce(array_agg(r.before ORDER BY r.ord), '{}') FROM ranked r WHERE r.ord IS NOT NULL)::float8[] AS before`
}

/**
 * A page `skip` rows beyond an anchor of a set rows have been created since, and in the same snapshot
 * whether the writes can still be followed, the created rows the result set has, and how many of them
 * sort before that anchor: the page is the one asked for when that is the count its skip assumed.
 */
export function followedSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, scan: Scan, keyNull: boolean, order: SortOrder, present: F[], log: ChangeLog, withTotal: boolean, reach: number): SQL {
  const near = sql`SELECT 1::bigint AS ord, ${nearKey(spec, sort, sql`${placeholder('k')}::text`)} AS k, ${placeholder('i')}::bigint AS id`
  const total = withTotal ? sql`, ${countedTotalColumn(spec)}` : sql``
  return sql`${seekPageSql(spec, sort, scan, keyNull, present, reach)}, ${followCtes(spec, sort, order, present, log, near)}
    SELECT t.*, r.* FROM (SELECT (SELECT followed FROM st) AS followed, (SELECT count(*) FROM added)::float8 AS added,
      (SELECT r.before FROM ranked r WHERE r.ord IS NOT NULL)::float8 AS before${total}) t
    ${itemsSql(spec, sort, sql`${pageSlice} AND (SELECT followed FROM st)`)}`
}

/**
 * Every STRIDE-th row of up to `anchorChunk` rows in the page's order, from the start (`page` from
 * `pageIdsSql` at offset 0) or beyond a position (`seekPageSql`), with the table's version. `page` is
 * read once, streamed rather than materialized (a chunk's rows spilled to disk), and only the
 * anchors' rows are looked up for their keys. The keys travel as JSON text: a driver may read a NULL
 * element of a text array as the word NULL.
 */
export function anchorChunkSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, pageCtes: SQL): SQL {
  const keyText = sql.raw(keyTextSql(spec.sorts[sort], spec.keys[sort]))
  const table = sql.raw(spec.table)
  const every = sql.raw(String(STRIDE))
  return sql`${pageCtes},
    chunk AS MATERIALIZED (SELECT coalesce(max(page.ord), 0) AS n,
      coalesce(array_agg(page.id ORDER BY page.ord) FILTER (WHERE page.ord % ${every} = 0), '{}') AS ids FROM page)
    SELECT ${versionSql(spec.table)}::float8 AS version, chunk.n::float8 AS n,
      (SELECT coalesce(json_agg(${keyText} ORDER BY a.ord), '[]') FROM unnest(chunk.ids) WITH ORDINALITY AS a(id, ord)
        JOIN ${table} m ON m.id = a.id)::text AS keys,
      chunk.ids::float8[] AS ids, pg_current_snapshot()::text AS snap,
      (SELECT coalesce(max(m.id), 0) FROM ${table} m)::float8 AS top, ${spec.changes?.epoch ?? sql`NULL`}::float8 AS epoch
    FROM chunk`
}
