import { sql, type SQL } from 'drizzle-orm'
import { versionSql } from '../../db/counters.js'
import type { ChangeLog } from '../../db/change-log.js'
import { whereSql } from '../filters.js'
import { countedTotalColumn, itemsSql, pageSlice } from '../items.js'
import { keyTextSql, nearKey } from '../keys.js'
import { orderSql, type Scan } from '../order.js'
import type { SortOrder } from '../cursor.js'
import { numberedParts, seekPageSql, seekParts, type SeekPart } from '../seek.js'
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
 * Every STRIDE-th row of up to `reach` rows in the result set's order, from its start, or beyond the
 * position (`k`, `i`) of the last anchor, with the table's version. Each part of the rows is read once,
 * streamed through one aggregate that counts it and keeps its anchors' ids and keys: the keys come from
 * the index the part is read through, not from the table, and no part is materialized: looking the
 * anchors' rows up by id, and materializing the parts, were most of a chunk
 * (docs/performance.md#anchors-of-deep-pages). A row's number is its number in its part plus the rows of the parts before it, and a part
 * reads only the rows those left to reach. The keys travel as JSON text: a driver may read a NULL
 * element of a text array as the word NULL.
 */
export function anchorChunkSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, order: SortOrder, present: F[],
  after: { scan: Scan, keyNull: boolean } | undefined, reach: number): SQL {
  const table = sql.raw(spec.table)
  const limit = sql.raw(String(reach))
  const every = sql.raw(String(STRIDE))
  const keyText = sql.raw(keyTextSql('s.k', spec.keys[sort]))
  const scan = after?.scan ?? { keyDesc: order === 'desc', idDesc: false }
  const parts: SeekPart[] = after === undefined
    ? [{ where: sql`true`, order: orderSql(spec.sorts[sort], order, false) }]
    : seekParts(spec, sort, after.scan, after.keyNull, 'i')
  const { walk, numbered } = numberedParts(spec, sort, scan, parts, present, reach)
  const ctes = parts.map((part, n) => {
    const before = n === 0 ? sql`0` : sql.raw(`(SELECT n FROM a${n - 1})`)
    const partLimit = n === 0 || part.walk === true ? limit : sql`greatest(${limit} - ${before}, 0)`
    const anchor = sql`(s.po + ${before}) % ${every} = 0`
    return sql`${sql.raw(`a${n}`)} AS MATERIALIZED (SELECT ${before} + count(*) AS n,
      coalesce(array_agg(s.id ORDER BY s.po) FILTER (WHERE ${anchor}), '{}') AS ids,
      coalesce(jsonb_agg(${keyText} ORDER BY s.po) FILTER (WHERE ${anchor}), '[]') AS keys
      FROM (${numbered(n, partLimit, { key: true })}) s WHERE s.po + ${before} <= ${limit})`
  })
  const all = (column: string): SQL => sql.raw(parts.map((_, n) => `a${n}.${column}`).join(' || '))
  return sql`WITH ${walk === undefined ? sql`` : sql`RECURSIVE ${walk}, `}${sql.join(ctes, sql`, `)}
    SELECT ${versionSql(spec.table)}::float8 AS version, ${sql.raw(`a${parts.length - 1}.n`)}::float8 AS n,
      (${all('keys')})::text AS keys, (${all('ids')})::float8[] AS ids, pg_current_snapshot()::text AS snap,
      (SELECT coalesce(max(m.id), 0) FROM ${table} m)::float8 AS top, ${spec.changes?.epoch ?? sql`NULL`}::float8 AS epoch
    FROM ${sql.raw(parts.map((_, n) => `a${n}`).join(', '))}`
}
