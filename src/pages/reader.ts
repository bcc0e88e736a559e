import { createHash } from 'node:crypto'
import { channel } from 'node:diagnostics_channel'
import { sql, type SQL } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { statement, type Statement } from '../db/statement.js'
import { InvalidCursorError } from '../errors.js'
import { heavyRead } from '../db/heavy-reads.js'
import { ANCHOR_BYTES } from '../memory/budget.js'
import { beside, MAX_LIMIT, type Cursor, type PageRequest, type PageResult, type Position, type SortOrder } from './pagination.js'
import { reachFor } from './reach.js'
import { AnchorCache, anchorFor, FOLLOW_MAX, FOLLOW_REACH, followCandidates, followedAnchor, recordMoves, STRIDE, type AnchorOrigin, type Anchors, type FollowedAnchor } from './anchors.js'

// One implementation of reading a page of any collection (CONTRACT 7: exact at any depth, whoever
// writes). Totals come from the trigger-maintained counters of drizzle/0006 when the filters are one
// counted value (or none), else from count(*). Pages whose sort has buckets in the order-statistic
// index are located in it: a few short range reads of bucket counts and a seek, whatever the depth.
// Any other page is read with OFFSET from whichever end of the index is nearer. A page asked for by
// cursor is a seek from the cursor's position on the (key, id) index that serves the sort. A deep page
// whose result set has anchors (src/pages/anchors.ts) is a seek from the anchor before it, whatever
// the sort: fewer than 256 index entries skipped, no counters read; after rows were created, from the
// anchor before it once each has moved by the created rows before it (the table's change log).

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
  filters: Record<F, FilterSpec>
  /** Sorts located through the order-statistic index, and the filter whose values rank too. */
  ranked: { dims: Partial<Record<S, RankedDim>>, filter?: F }
  /**
   * The table's change log, when it has one: anchors then follow the rows created since they were
   * read (src/pages/anchors.ts) instead of being retired by the first write.
   */
  changes?: ChangeLog
}

/** A log of the ids every writing transaction wrote, kept in the writing transaction (drizzle/0010). */
export interface ChangeLog {
  /**
   * The ids written by the transactions whose writes snapshot `snap` (a pg_snapshot) does not see, one
   * per entry (an id written twice comes twice), in an order an index reads them in.
   */
  since: (snap: SQL) => SQL
  /** The log's epoch: it changes when the log is emptied (a TRUNCATE). */
  epoch: SQL
  /** Whether every entry `since` needs is still kept (none pruned by retention). */
  intact: (snap: SQL) => SQL
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

interface PageRow { total?: number, ord?: number, cursor_key?: string | null, other?: boolean, version?: number }

export interface CollectionReaderOptions {
  /** Rows each statement reading anchors walks: a multiple of STRIDE (default ANCHOR_CHUNK). */
  anchorChunk?: number
  /** false: no deep page is read from anchors, so that every one is located or walked (default true). */
  anchors?: boolean
}

interface AnchorChunk { version: number, n: number, keys: string, ids: number[], snap: string, top: number, epoch: number | null }

interface FollowRow { version: number, followed: boolean, added: number, before: number[] }
interface FollowedRow { followed: boolean, added: number, before: number }

/** Where a chunk of anchors was read, when the table's changes are logged (its epoch is then read). */
const originOf = (chunk: AnchorChunk): AnchorOrigin | undefined =>
  chunk.epoch === null ? undefined : { snapshot: chunk.snap, top: chunk.top, epoch: chunk.epoch }

// Rows an anchor-reading statement walks: a multiple of STRIDE, so that each chunk ends on an anchor,
// and short (70 ms on 10,000,000 rows at rest) so that a chunk stays far inside the statement timeout
// on a busy database too.
const ANCHOR_CHUNK = STRIDE * 256

// How long a deep page with no rank to fall back on (OFFSET would walk to it) waits for the next part
// of the anchors of its result set being read, rather than walking. It waits as long as the parts keep
// coming: on 10,000,000 rows an OFFSET walk by subject ran into the statement timeout, and pages that
// gave up after 5 s walked while the anchors that would have served them were still being read.
const ANCHOR_WAIT_MS = 5000

function keyTextSql (expr: string, type: KeyType): string {
  if (type === 'id') return 'NULL::text'
  if (type === 'timestamptz') return `(extract(epoch FROM ${expr}) * 1000000)::bigint::text`
  return `${expr}::text`
}

function keyParamSql (type: KeyType): SQL {
  return keyFromText(sql`${placeholder('k')}`, type)
}

/** A key as a cursor carries it (text), read back as the sort's type. */
function keyFromText (k: SQL, type: KeyType): SQL {
  if (type === 'timestamptz') return sql`('epoch'::timestamptz + ${k}::bigint * interval '1 microsecond')`
  if (typeof type === 'object') return sql`${k}::${sql.raw(type.enum)}`
  return sql`${k}::${sql.raw(type === 'id' ? 'text' : type)}`
}

const KEY_PATTERNS = { integer: /^-?\d{1,10}$/, numeric: /^-?\d{1,30}(\.\d{1,30})?$/, timestamptz: /^-?\d{1,17}$/ }

/** Whether a cursor's key can be read back as the sort's type: a crafted one is a 400, not a 500. */
function validKey (key: string | null, type: KeyType): boolean {
  if (type === 'id') return key === null
  if (key === null || type === 'text') return true
  if (typeof type === 'object') return type.values.includes(key)
  if (type === 'integer') return KEY_PATTERNS.integer.test(key) && Math.abs(Number(key)) <= 2_147_483_647
  return KEY_PATTERNS[type].test(key)
}

/** A value read with a page in place of its total, named for the statement that reads it. */
export interface Companion { name: string, sql: SQL }

/** The order a seek walks the index in: the requested order after a cursor, its reverse before one. */
interface Scan { keyDesc: boolean, idDesc: boolean }

function scanOf (cursor: Cursor, order: SortOrder): Scan {
  return cursor.direction === 'after'
    ? { keyDesc: order === 'desc', idDesc: false }
    : { keyDesc: order !== 'desc', idDesc: true }
}

/**
 * One index range of a seek, in scan order: `where` its rows, `order` their order. A `walk` part is a
 * run of groups of equal keys, each read by id (see `grouped`).
 */
interface SeekPart { where: SQL, order: string, walk?: boolean }

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

/** How a page at NEAR_START or deeper was read. */
export type DeepPageVia = 'anchor' | 'rank' | 'offset'
export interface DeepPageRead {
  table: string
  via: DeepPageVia
  /** From anchors still being read (via 'anchor' only). */
  partial?: boolean
  /** From anchors following the rows created since they were read (via 'anchor' only). */
  followed?: boolean
}
/** A message for each page read at NEAR_START or deeper, for /metrics. */
export const deepPageReads = channel('messages-api:deep-page')

function readVia (table: string, via: DeepPageVia, partial?: boolean, followed?: boolean): void {
  if (!deepPageReads.hasSubscribers) return
  const read: DeepPageRead = { table, via }
  if (partial !== undefined) read.partial = partial
  if (followed !== undefined) read.followed = followed
  deepPageReads.publish(read)
}

export function createCollectionReader<S extends string, F extends string, Row extends object> (spec: CollectionSpec<S, F>, options: CollectionReaderOptions = {}) {
  const anchorChunk = options.anchorChunk ?? ANCHOR_CHUNK
  if (anchorChunk <= 0 || anchorChunk % STRIDE !== 0) throw new RangeError(`anchorChunk must be a positive multiple of ${STRIDE}`)
  const statements = new Map<string, Statement<Row & PageRow>>()
  const anchorStatements = new Map<string, Statement<AnchorChunk>>()
  // Per database handle: a replica's rows are at its own version.
  const anchorCaches = new WeakMap<Database, AnchorCache>()
  const filterNames = Object.keys(spec.filters) as F[]

  function cached (name: string, build: () => SQL): Statement<Row & PageRow> {
    let found = statements.get(name)
    if (found === undefined) {
      found = statement<Row & PageRow>(`${spec.table}_${statements.size}`, build())
      statements.set(name, found)
    }
    return found
  }

  function anchorStatement (name: string, build: () => SQL): Statement<AnchorChunk> {
    let found = anchorStatements.get(name)
    if (found === undefined) {
      found = statement<AnchorChunk>(`${spec.table}_anchors_${anchorStatements.size}`, build())
      anchorStatements.set(name, found)
    }
    return found
  }

  const keyColumn = (sort: S) => sql.raw(`${keyTextSql(spec.sorts[sort], spec.keys[sort])} AS cursor_key`)

  /** The exact number of rows under the page's counter key, as a column. */
  const countedTotal = sql`${countedTotalSql(spec.table, sql`${placeholder('key')}::text`)}::float8 AS total`

  /**
   * The end of every page statement: the rows of `page` that `keep` keeps, joined to what an item shows,
   * in page order, beside the one row of values `t` read with them (a page past the end is that row alone).
   */
  const itemsSql = (sort: S, keep: SQL): SQL => sql`LEFT JOIN LATERAL (SELECT ${spec.columns}, ${keyColumn(sort)}, page.ord
        FROM page JOIN ${spec.from} ON m.id = page.id WHERE ${keep}) r ON true
      ORDER BY r.ord`

  function whereSql (present: F[]): SQL {
    const conditions = present.map((name) => spec.filters[name].condition)
    return conditions.length === 0 ? sql`true` : sql.join(conditions, sql` AND `)
  }

  /** Whether the counters hold the total of the rows these filters match (none, or one with a counter key). */
  function counted (present: F[]): boolean {
    return present.length === 0 || (present.length === 1 && spec.filters[present[0]!].key !== undefined)
  }

  function totalSql (present: F[]): SQL {
    if (counted(present)) {
      return sql`SELECT ${countedTotal}`
    }
    return sql`SELECT count(*)::float8 AS total FROM ${sql.raw(spec.table)} m WHERE ${whereSql(present)}`
  }

  function counterKey (present: F[], values: FilterValues<F>): string {
    if (present.length === 0) return ''
    const name = present[0]!
    return spec.filters[name].key?.(values[name]!) ?? ''
  }

  /**
   * A page located in the order-statistic index. Its `page` reads `reach` rows, a constant at least the
   * page's limit (src/pages/reach.ts), and the rows beyond `limit` are dropped before the join: with a
   * LIMIT parameter, the generic plan was priced for an unknown row count and never chosen, and
   * PostgreSQL planned the statement on every execution (1.4 ms at rest, 5.7 ms under load, against
   * about 2 ms to run it).
   */
  function locatedSql (sort: S, dim: RankedDim, order: SortOrder, present: F[], reach: number): SQL {
    const by = orderSql(spec.sorts[sort], order, false)
    return sql`WITH ${locateSql(spec.table, sql`${placeholder('key')}::text`, dim, sql`${placeholder('offset')}::bigint`, order === 'desc')},
      page AS MATERIALIZED (
        SELECT m.id, row_number() OVER (ORDER BY ${sql.raw(by)}) AS ord FROM ${sql.raw(spec.table)} m
        WHERE ${sql.raw(BOUNDS[dim][order])} AND ${whereSql(present)}
        ORDER BY ${sql.raw(by)} OFFSET (SELECT skip FROM loc) LIMIT ${sql.raw(String(reach))})
      SELECT t.total, r.* FROM (SELECT ${countedTotal}) t
      ${itemsSql(sort, sql`page.ord <= (SELECT skip FROM loc) + ${placeholder('limit')}::bigint`)}`
  }

  /** `materialized`: false for a statement that reads `page` once, which PostgreSQL then streams. */
  function pageIdsSql (sort: S, order: SortOrder, present: F[], materialized = true): SQL {
    const by = orderSql(spec.sorts[sort], order, false)
    return sql`page AS ${sql.raw(materialized ? 'MATERIALIZED ' : '')}(
        SELECT m.id, row_number() OVER (ORDER BY ${sql.raw(by)}) AS ord FROM ${sql.raw(spec.table)} m
        WHERE ${whereSql(present)} ORDER BY ${sql.raw(by)} OFFSET ${placeholder('offset')}::bigint LIMIT ${placeholder('limit')}::bigint)`
  }

  /**
   * A page by walking OFFSET rows, and its total, in one statement and one snapshot. The walk starts
   * from whichever end of the index is nearer, which depends on the total: read in a statement of its
   * own, a write between the two moved every page read from the end by the rows it wrote. Only one of
   * the two walks runs (the other's condition is false before it reads a row); rows from the end are
   * numbered negatively, so that the page still comes out in its order.
   */
  function walkedSql (sort: S, order: SortOrder, present: F[]): SQL {
    const table = sql.raw(spec.table)
    const where = whereSql(present)
    const offset = sql`${placeholder('offset')}::bigint`
    const limit = sql`${placeholder('limit')}::bigint`
    const fromEnd = sql`(SELECT t.total::bigint FROM t) - ${offset} - ${limit}`
    const by = orderSql(spec.sorts[sort], order, false)
    const back = orderSql(spec.sorts[sort], order, true)
    return sql`WITH t AS MATERIALIZED (${totalSql(present)}),
      ahead AS MATERIALIZED (
        SELECT m.id, row_number() OVER (ORDER BY ${sql.raw(by)}) AS ord FROM ${table} m
        WHERE ${fromEnd} >= ${offset} AND ${where} ORDER BY ${sql.raw(by)} OFFSET ${offset} LIMIT ${limit}),
      behind AS MATERIALIZED (
        SELECT m.id, -row_number() OVER (ORDER BY ${sql.raw(back)}) AS ord FROM ${table} m
        WHERE ${fromEnd} < ${offset} AND ${where} ORDER BY ${sql.raw(back)}
        OFFSET greatest(${fromEnd}, 0) LIMIT greatest(least(${limit}, (SELECT t.total::bigint FROM t) - ${offset}), 0)),
      page AS (SELECT id, ord FROM ahead UNION ALL SELECT id, ord FROM behind)
      SELECT t.total, r.* FROM t
      ${itemsSql(sort, sql`true`)}`
  }

  /** A page near the start and its total, in one statement and one snapshot. */
  function nearStartSql (sort: S, order: SortOrder, present: F[]): SQL {
    return sql`WITH ${pageIdsSql(sort, order, present)}
      SELECT t.total, r.* FROM (${totalSql(present)}) t
      ${itemsSql(sort, sql`true`)}`
  }

  /** The dimension that locates this page, when the sort has one and the filters allow it. */
  function rankedDim (sort: S, present: F[]): RankedDim | undefined {
    const dim = spec.ranked.dims[sort]
    if (dim === undefined) return undefined
    if (present.length === 0) return dim
    return present.length === 1 && present[0] === spec.ranked.filter ? dim : undefined
  }

  function strip (rows: Array<Row & PageRow>): { rows: Row[], keys: Array<string | null> } {
    const keys: Array<string | null> = []
    for (const row of rows) {
      keys.push(row.cursor_key ?? null)
      delete row.total
      delete row.ord
      delete row.cursor_key
      delete row.other
      delete row.version
    }
    return { rows, keys }
  }

  /** The parts of the rows strictly beyond a position, in scan order, reading the id from `idName`. */
  function seekParts (sort: S, scan: Scan, keyNull: boolean, idName: string): SeekPart[] {
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
  function walkSql (sort: S, scan: Scan, first: SQL, prior: SQL, present: F[], limit: SQL): SQL {
    const x = spec.sorts[sort]
    const table = sql.raw(spec.table)
    const where = whereSql(present)
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

  /**
   * The CTEs ending in `page(id, ord)`: the first `reach` rows beyond the position (`k`, `i`) in scan
   * order, numbered from 1. `reach` is a constant, not a parameter: with every row count known, the
   * generic plan of the statement costs what a custom one does, so PostgreSQL keeps it and does not
   * plan the statement again on each execution, which took three times as long as running it.
   * `stacked` (for a long reach read once, as an anchor chunk is) numbers several parts without
   * sorting their union, and streams `page` rather than materializing it.
   */
  function seekPageSql (sort: S, scan: Scan, keyNull: boolean, present: F[], reach: number, stacked = false): SQL {
    const table = sql.raw(spec.table)
    const where = whereSql(present)
    const limit = sql.raw(String(reach))
    const parts = seekParts(sort, scan, keyNull, 'i')
    const only = parts.length === 1 ? parts[0]! : undefined
    if (only !== undefined && only.walk !== true) {
      // One index range: its own order numbers the rows, with no sort of the parts.
      return sql`WITH page ${sql.raw(stacked ? 'AS' : 'AS MATERIALIZED')} (SELECT m.id, row_number() OVER (ORDER BY ${sql.raw(only.order)}) AS ord FROM ${table} m
        WHERE ${only.where} AND ${where} ORDER BY ${sql.raw(only.order)} LIMIT ${limit})`
    }
    let walk: SQL | undefined
    // Each part's rows beyond the position, numbered `po` in the part's own order, at most `partLimit`;
    // with `tagged`, each row also carries the part's number.
    const numbered = (part: SeekPart, n: number, partLimit: SQL, tagged: boolean): SQL => {
      const tag = tagged ? sql`${n} AS part, ` : sql``
      if (part.walk === true) {
        walk = walkSql(sort, scan, part.where, parts[n - 1]!.where, present, limit)
        const byId = `p.id${scan.idDesc ? ' DESC' : ''}`
        return sql`SELECT ${tag}p.id, row_number() OVER (ORDER BY w.step, ${sql.raw(byId)}) AS po FROM walk w
          CROSS JOIN LATERAL (SELECT m.id FROM ${table} m WHERE ${sql.raw(spec.sorts[sort])} = w.k AND ${where}
            ORDER BY ${sql.raw(`m.id${scan.idDesc ? ' DESC' : ''}`)} LIMIT ${limit}) p
          ORDER BY w.step, ${sql.raw(byId)} LIMIT ${partLimit}`
      }
      return sql`SELECT ${tag}m.id, row_number() OVER (ORDER BY ${sql.raw(part.order)}) AS po FROM ${table} m
        WHERE ${part.where} AND ${where} ORDER BY ${sql.raw(part.order)} LIMIT ${partLimit}`
    }
    if (!stacked) {
      const selects = parts.map((part, n) => sql`(${numbered(part, n, limit, true)})`)
      return sql`WITH ${walk === undefined ? sql`` : sql`RECURSIVE ${walk}, `}page AS MATERIALIZED (
        SELECT s.id, row_number() OVER (ORDER BY s.part, s.po) AS ord FROM (${sql.join(selects, sql` UNION ALL `)}) s
        ORDER BY s.part, s.po LIMIT ${limit})`
    }
    // Stacked (for a long reach, as anchor chunks have): the parts follow one another, so a row's number
    // is its number in its part plus the rows of the parts before it, with no sort of their union, and a
    // part reads only the rows the parts before it left to reach. A walk reads at most `reach` rows.
    const ctes: SQL[] = []
    const unions: SQL[] = []
    parts.forEach((part, n) => {
      const before = n === 0 ? undefined : sql.raw(`(SELECT n FROM c${n - 1})`)
      const partLimit = before === undefined || part.walk === true ? limit : sql`greatest(${limit} - ${before}, 0)`
      ctes.push(sql`${sql.raw(`p${n}`)} AS MATERIALIZED (${numbered(part, n, partLimit, false)})`)
      if (n < parts.length - 1) {
        ctes.push(sql`${sql.raw(`c${n}`)} AS MATERIALIZED (SELECT ${before ?? sql`0`} + count(*) AS n FROM ${sql.raw(`p${n}`)})`)
      }
      unions.push(sql`SELECT id, po + ${before ?? sql`0`} AS ord FROM ${sql.raw(`p${n}`)}`)
    })
    return sql`WITH ${walk === undefined ? sql`` : sql`RECURSIVE ${walk}, `}${sql.join(ctes, sql`, `)},
      page AS (SELECT id, ord FROM (${sql.join(unions, sql` UNION ALL `)}) u WHERE ord <= ${limit})`
  }

  /** The rows of `page` after the first `skip`, at most `limit` of them. */
  const pageSlice = sql`page.ord > ${placeholder('skip')}::bigint AND page.ord <= ${placeholder('skip')}::bigint + ${placeholder('limit')}::bigint`

  /**
   * A page by cursor, in one statement and one snapshot: up to `limit` rows beyond the cursor in scan
   * order (the caller asks one more than the page to learn whether more follow), whether any row lies
   * the other way (from the position beside the cursor, so the cursor's own item counts), and the total.
   */
  function seekSql (sort: S, scan: Scan, keyNull: boolean, present: F[], total: SQL, reach: number): SQL {
    const table = sql.raw(spec.table)
    const where = whereSql(present)
    const back = { keyDesc: !scan.keyDesc, idDesc: !scan.idDesc }
    // Ordered like the index, so that even a generic plan probes it rather than scanning the table.
    const other = seekParts(sort, back, keyNull, 'ci').map((part) =>
      sql`EXISTS (SELECT 1 FROM ${table} m WHERE ${part.where} AND ${where} ORDER BY ${sql.raw(part.order)} LIMIT 1)`)
    return sql`${seekPageSql(sort, scan, keyNull, present, reach)}
      SELECT t.total, x.other, r.* FROM (${total}) t CROSS JOIN (SELECT ${sql.join(other, sql` OR `)} AS other) x
      ${itemsSql(sort, pageSlice)}`
  }

  /**
   * A page `skip` rows beyond an anchor, reading `reach` rows (at least skip plus limit), with the
   * table's version; `withTotal` (for an anchor set still being read, which does not know it) adds the
   * counted total, read in the same snapshot.
   */
  function anchoredSql (sort: S, scan: Scan, keyNull: boolean, present: F[], withTotal: boolean, reach: number): SQL {
    const total = withTotal ? sql`, ${countedTotal}` : sql``
    return sql`${seekPageSql(sort, scan, keyNull, present, reach)}
      SELECT t.*, r.* FROM (SELECT ${versionSql(spec.table)}::float8 AS version${total}) t
      ${itemsSql(sort, pageSlice)}`
  }

  /**
   * CTEs reading what the rows written since an anchor set was read did to it, in the statement's
   * snapshot: `st.followed` when every row written since then was created since then (an id above the
   * highest the set saw: an update or delete of an older row, whose old key the log does not hold,
   * cannot be followed), in no more than FOLLOW_MAX log entries, and the log holds them all; `added`, those of them
   * the result set has now; `ranked`, for each anchor of `near(ord, k, id)`, how many of them sort
   * before it (`before`), compared by PostgreSQL itself, in the sort's collation.
   */
  function followCtes (sort: S, order: SortOrder, present: F[], log: ChangeLog, near: SQL): SQL {
    const table = sql.raw(spec.table)
    const snap = sql`${placeholder('snap')}::pg_snapshot`
    const key = spec.keys[sort] === 'id' ? sql`NULL::text` : sql.raw(spec.sorts[sort])
    const by = orderSql(spec.keys[sort] === 'id' ? 'm.id' : 'm.k', order, false)
    return sql`ok AS MATERIALIZED (SELECT ${log.epoch} = ${placeholder('epoch')}::bigint AND ${log.intact(snap)} AS ok),
      ch AS MATERIALIZED (SELECT c.id FROM (${log.since(snap)}) c WHERE (SELECT ok FROM ok) LIMIT ${sql.raw(String(FOLLOW_MAX + 1))}),
      st AS MATERIALIZED (SELECT (SELECT ok FROM ok) AND count(*) <= ${sql.raw(String(FOLLOW_MAX))}
        AND coalesce(bool_and(ch.id > ${placeholder('top')}::bigint), true) AS followed FROM ch),
      added AS MATERIALIZED (SELECT m.id, ${key} AS k FROM ${table} m
        WHERE m.id IN (SELECT id FROM ch) AND (SELECT followed FROM st) AND ${whereSql(present)}),
      near AS (${near}),
      ranked AS (SELECT m.ord, count(*) FILTER (WHERE m.ord IS NULL) OVER (ORDER BY ${sql.raw(by)}) AS before
        FROM (SELECT NULL::bigint AS ord, k, id FROM added UNION ALL SELECT ord, k, id FROM near) m)`
  }

  /** The key of a cursor key as text, or NULL for the sort by id. */
  const nearKey = (sort: S, text: SQL): SQL => spec.keys[sort] === 'id' ? sql`NULL::text` : keyFromText(text, spec.keys[sort])

  /**
   * Whether the writes since an anchor set was read can be followed, with the table's version, the
   * rows created since in the result set (`added`), and how many of them sort before each candidate
   * anchor (`near`: [key, id] pairs as JSON).
   */
  function followSql (sort: S, order: SortOrder, present: F[], log: ChangeLog): SQL {
    const near = sql`SELECT a.ord, ${nearKey(sort, sql`(a.v->>0)`)} AS k, (a.v->>1)::bigint AS id
      FROM json_array_elements(${placeholder('near')}::json) WITH ORDINALITY AS a(v, ord)`
    return sql`WITH ${followCtes(sort, order, present, log, near)}
      SELECT ${versionSql(spec.table)}::float8 AS version, (SELECT followed FROM st) AS followed,
        (SELECT count(*) FROM added)::float8 AS added,
        (SELECT coalesce(array_agg(r.before ORDER BY r.ord), '{}') FROM ranked r WHERE r.ord IS NOT NULL)::float8[] AS before`
  }

  /**
   * A page `skip` rows beyond an anchor of a set rows have been created since, and in the same snapshot
   * whether the writes can still be followed, the created rows the result set has, and how many of them
   * sort before that anchor: the page is the one asked for when that is the count its skip assumed.
   */
  function followedSql (sort: S, scan: Scan, keyNull: boolean, order: SortOrder, present: F[], log: ChangeLog, withTotal: boolean, reach: number): SQL {
    const near = sql`SELECT 1::bigint AS ord, ${nearKey(sort, sql`${placeholder('k')}::text`)} AS k, ${placeholder('i')}::bigint AS id`
    const total = withTotal ? sql`, ${countedTotal}` : sql``
    return sql`${seekPageSql(sort, scan, keyNull, present, reach)}, ${followCtes(sort, order, present, log, near)}
      SELECT t.*, r.* FROM (SELECT (SELECT followed FROM st) AS followed, (SELECT count(*) FROM added)::float8 AS added,
        (SELECT r.before FROM ranked r WHERE r.ord IS NOT NULL)::float8 AS before${total}) t
      ${itemsSql(sort, sql`${pageSlice} AND (SELECT followed FROM st)`)}`
  }

  /**
   * Every STRIDE-th row of up to `anchorChunk` rows in the page's order, from the start (`page` from
   * `pageIdsSql` at offset 0) or beyond a position (`seekPageSql`), with the table's version. `page` is
   * read once, streamed rather than materialized (a chunk's rows spilled to disk), and only the
   * anchors' rows are looked up for their keys. The keys travel as JSON text: a driver may read a NULL
   * element of a text array as the word NULL.
   */
  function anchorChunkSql (sort: S, pageCtes: SQL): SQL {
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

  /**
   * The anchors of a result set, read in chunks, all in one read-only repeatable-read transaction: one
   * snapshot, so that writes meanwhile (by anyone) are followed afterwards like any later write rather
   * than ending the read. Each chunk checks the version the first one read all the same (a set read
   * at two versions would be wrong). After each chunk but the last, the anchors so far are published,
   * when a page can read its total beside them. It takes one heavy-read slot for the whole transaction:
   * a slot taken per chunk would let transactions holding connections wait for slots held by walks
   * waiting for connections.
   */
  async function readAnchors (db: Database, sort: S, order: SortOrder, present: F[], params: Record<string, unknown>,
    publish: (part: Anchors) => void): Promise<Anchors | undefined> {
    return await heavyRead(db, async () => await db.transaction(async (tx) => await readAnchorChunks(tx, sort, order, present, params, publish),
      { isolationLevel: 'repeatable read', accessMode: 'read only' }))
  }

  async function readAnchorChunks (db: Database, sort: S, order: SortOrder, present: F[], params: Record<string, unknown>,
    publish: (part: Anchors) => void): Promise<Anchors | undefined> {
    const shape = present.join(',')
    const keys: Array<string | null> = []
    const ids: number[] = []
    let version: number | undefined
    let total = 0
    let after: Position | null = null
    for (;;) {
      let run: Statement<AnchorChunk>
      if (after === null) {
        run = anchorStatement(`anchors:${sort}:${order}:${shape}`, () => anchorChunkSql(sort, sql`WITH ${pageIdsSql(sort, order, present, false)}`))
      } else {
        const keyNull = after.key === null
        const scan = scanOf({ ...after, direction: 'after' }, order)
        run = anchorStatement(`anchors-after:${sort}:${order}:${keyNull}:${shape}`, () => anchorChunkSql(sort, seekPageSql(sort, scan, keyNull, present, anchorChunk, true)))
      }
      const [chunk] = await run(db, { ...params, offset: 0, limit: anchorChunk, k: after?.key, i: after?.id })
      if (chunk === undefined || (version !== undefined && chunk.version !== version)) return undefined
      version = chunk.version
      total += chunk.n
      keys.push(...JSON.parse(chunk.keys) as Array<string | null>)
      ids.push(...chunk.ids)
      if (chunk.n < anchorChunk) return { version, total, keys, ids: Float64Array.from(ids), origin: originOf(chunk) }
      if (counted(present)) publish({ version, total: null, keys: keys.slice(), ids: Float64Array.from(ids), origin: originOf(chunk) })
      after = { key: keys[keys.length - 1] ?? null, id: ids[ids.length - 1]! }
    }
  }

  /**
   * A page by number from the anchors held for its result set, when they are of the version the
   * page's own statement reads; undefined when there are none, or they are out of date (and are then
   * read again in the background). Anchors still being read serve the pages they reach already.
   * `unranked` is a page with no counters to locate it (OFFSET would walk to it). It follows anchors
   * that rows have been created since; and with `wait`, a page they do not reach yet waits until they
   * do, or until the read ends, or until no part has come for ANCHOR_WAIT_MS, and tries once more. A page with
   * counters is located in them instead: under 20 writes a second at 1,000,000 rows, following served
   * 551 random pages a second by id where the counters served 837.
   */
  async function anchored (db: Database, page: PageRequest<S>, present: F[], params: Record<string, unknown>, unranked: boolean, wait = unranked): Promise<PageResult<Row> | undefined> {
    let cache = anchorCaches.get(db)
    if (cache === undefined) {
      cache = new AnchorCache(ANCHOR_BYTES)
      anchorCaches.set(db, cache)
    }
    const key = JSON.stringify([page.sort, page.order, params])
    const read = async (publish: (part: Anchors) => void): Promise<Anchors | undefined> => await readAnchors(db, page.sort, page.order, present, params, publish)
    const held = cache.get(key)
    const at = held === undefined || held.behind === true ? undefined : anchorFor(held, page.offset)
    if (held !== undefined && at !== undefined) {
      const partial = held.total === null
      const found = await fromAnchor(db, page, present, params, at, partial, STRIDE)
      const version = found[0]?.version ?? 0
      if (version === held.version) {
        readVia(spec.table, 'anchor', partial)
        // Read before strip(), which removes it from the rows.
        const total = held.total ?? found[0]?.total ?? 0
        return { ...strip(found[0]?.ord == null ? [] : found), total }
      }
      // A replica behind the anchors: it will catch up; nothing to read again.
      if (version < held.version) return undefined
      if (unranked && held.origin !== undefined) held.behind = true
      else cache.retire(key, version)
    } else if (held !== undefined && held.total !== null && held.behind !== true) {
      // Past the last anchor: within a stride of the end, which the reads without anchors reach cheaply.
      return undefined
    }
    if (held?.behind === true) {
      const followed = await follow(db, held, page, present, params)
      if (followed === 'retire') cache.retire(key, Infinity)
      else if (followed !== undefined || held.total !== null) {
        // Read the set again meanwhile (as paced): the rows to follow only grow.
        cache.refresh(key, read)
        return followed
      }
      // A part of a set that does not reach the page yet: the parts still to come may.
    }
    const reading = cache.refresh(key, read)
    if (!wait || reading === undefined) return undefined
    for (;;) {
      const next = cache.progress(key)
      if (next === undefined) break
      let timer: NodeJS.Timeout | undefined
      const moved = await Promise.race([next.then(() => true), new Promise<boolean>((resolve) => { timer = setTimeout(resolve, ANCHOR_WAIT_MS, false) })])
      clearTimeout(timer)
      const now = cache.get(key)
      if (!moved || (now !== undefined && anchorFor(now, page.offset) !== undefined)) break
    }
    return await anchored(db, page, present, params, unranked, false)
  }

  /** The page `at.skip` rows after an anchor, read with fewer than `stride` rows skipped, and the version. */
  async function fromAnchor (db: Database, page: PageRequest<S>, present: F[], params: Record<string, unknown>,
    at: { position: Position, skip: number }, partial: boolean, stride: number): Promise<Array<Row & PageRow>> {
    const keyNull = at.position.key === null
    const scan = scanOf({ ...at.position, direction: 'after' }, page.order)
    const reach = reachFor(at.skip + page.limit, stride - 1 + MAX_LIMIT)
    const name = `anchored:${page.sort}:${page.order}:${keyNull}:${partial}:${reach}:${present.join(',')}`
    const run = cached(name, () => anchoredSql(page.sort, scan, keyNull, present, partial, reach))
    return await run(db, { ...params, k: at.position.key, i: at.position.id, skip: at.skip, limit: page.limit })
  }

  /**
   * A page from an anchor set that rows have been created since. The candidate anchors, moved by the
   * created rows before each (as earlier pages found, else as `followSql` reads), tell which one the
   * page starts after; the page is then read from it (`followedSql`) with the count of created rows
   * before it in the page's own snapshot.
   * When a write in between changed that count, the page is read again with the skip the new count
   * gives, a few times at most. A set still being read (which does not know its total) has the page's
   * statement read the total. 'retire' when the writes cannot be followed; undefined when this page
   * cannot be.
   */
  async function follow (db: Database, held: Anchors, page: PageRequest<S>, present: F[], params: Record<string, unknown>): Promise<PageResult<Row> | 'retire' | undefined> {
    const log = spec.changes
    const origin = held.origin
    if (log === undefined || origin === undefined) return 'retire'
    const partial = held.total === null
    const candidates = followCandidates(held, page.offset)
    if (candidates === undefined) return undefined
    const since = { snap: origin.snapshot, top: origin.top, epoch: origin.epoch }
    const measure = async (): Promise<FollowedAnchor | 'retire' | undefined> => {
      const moves = cached(`follow:${page.sort}:${page.order}:${present.join(',')}`, () => followSql(page.sort, page.order, present, log))
      const [moved] = await moves(db, { ...params, ...since, near: JSON.stringify(candidates.near) }) as unknown as FollowRow[]
      if (moved === undefined || !moved.followed) return 'retire'
      recordMoves(held, candidates.first, moved.before)
      return followedAnchor(held, page.offset, candidates.first, moved.before)
    }
    // The counts earlier pages found near this one, if any; else they are read.
    const known = held.moved?.subarray(candidates.first, candidates.first + candidates.near.length)
    let guessed = known !== undefined
    let at = known === undefined ? undefined : followedAnchor(held, page.offset, candidates.first, known)
    if (at === undefined) {
      guessed = false
      const measured = await measure()
      if (measured === 'retire') return 'retire'
      at = measured
    }
    for (let attempt = 0; at !== undefined && attempt < 3; attempt++) {
      const keyNull = at.position.key === null
      const scan = scanOf({ ...at.position, direction: 'after' }, page.order)
      const reach = reachFor(at.skip + page.limit, FOLLOW_REACH - 1 + MAX_LIMIT)
      const run = cached(`followed:${page.sort}:${page.order}:${keyNull}:${partial}:${reach}:${present.join(',')}`, () => followedSql(page.sort, scan, keyNull, page.order, present, log, partial, reach))
      const found = await run(db, { ...params, ...since, k: at.position.key, i: at.position.id, skip: at.skip, limit: page.limit }) as Array<Row & PageRow & FollowedRow>
      const head = found[0]
      if (head === undefined || !head.followed) return 'retire'
      recordMoves(held, at.index, [head.before])
      if (head.before === at.before) {
        readVia(spec.table, 'anchor', partial, true)
        // Read before strip(), which removes it from the rows.
        const total = held.total === null ? head.total ?? 0 : held.total + head.added
        return { ...strip(head.ord == null ? [] : found), total }
      }
      at = followedAnchor(held, page.offset, at.index, [head.before])
      if (at === undefined && guessed) {
        // The anchor guessed from earlier counts has moved past the page: read the counts near it.
        guessed = false
        const measured = await measure()
        if (measured === 'retire') return 'retire'
        at = measured
      }
    }
    return undefined
  }

  async function seek (db: Database, cursor: Cursor, page: PageRequest<S>, present: F[], params: Record<string, unknown>, companion?: Companion): Promise<PageResult<Row>> {
    const scan = scanOf(cursor, page.order)
    const keyNull = cursor.key === null
    // One more row than the page, to learn whether more follow.
    const reach = reachFor(page.limit + 1, MAX_LIMIT + 1)
    const name = `seek:${page.sort}:${scan.keyDesc}:${scan.idDesc}:${keyNull}:${reach}:${present.join(',')}:${companion?.name ?? ''}`
    const run = cached(name, () => seekSql(page.sort, scan, keyNull, present, companion === undefined ? totalSql(present) : sql`SELECT ${companion.sql}::float8 AS total`, reach))
    const check = beside(cursor, page.sort, page.order, cursor.direction === 'after' ? 'after' : 'before')
    const found = await run(db, { ...params, k: cursor.key, i: cursor.id, ci: check.id, skip: 0, limit: page.limit + 1 })
    const total = found[0]?.total ?? 0
    const other = found[0]?.other === true
    const { rows, keys } = strip(found[0]?.ord == null ? [] : found)
    const more = rows.length > page.limit
    if (more) {
      rows.pop()
      keys.pop()
    }
    if (cursor.direction === 'after') return { rows, keys, total, before: other, after: more }
    return { rows: rows.reverse(), keys: keys.reverse(), total, before: more, after: other }
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

    /**
     * A page and its exact total. By cursor, `companion` may name another value to read in the page's
     * snapshot in place of the total, for a caller that knows the total another way.
     */
    async read (db: Database, values: FilterValues<F>, page: PageRequest<S>, companion?: Companion): Promise<PageResult<Row>> {
      if (page.cursor !== null && !validKey(page.cursor.key, spec.keys[page.sort])) throw new InvalidCursorError()
      const present = this.present(values)
      if (present === null) return { rows: [], total: 0, keys: [], before: false, after: false }
      const shape = present.join(',')
      const params = this.placeholders(present, values)
      if (page.cursor !== null) return seek(db, page.cursor, page, present, params, companion)
      if (page.offset < NEAR_START) {
        const run = cached(`start:${page.sort}:${page.order}:${shape}`, () => nearStartSql(page.sort, page.order, present))
        const rows = await run(db, { ...params, offset: page.offset, limit: page.limit })
        const total = rows[0]?.total ?? 0
        // A page past the end has only the total row, with every item column null.
        return { ...strip(rows[0]?.ord == null ? [] : rows), total }
      }
      const dim = rankedDim(page.sort, present)
      const fromAnchor = options.anchors === false ? undefined : await anchored(db, page, present, params, dim === undefined)
      if (fromAnchor !== undefined) return fromAnchor
      readVia(spec.table, dim === undefined ? 'offset' : 'rank')
      if (dim !== undefined) {
        const reach = reachFor(page.limit, MAX_LIMIT)
        const run = cached(`located:${page.sort}:${page.order}:${reach}:${shape}`, () => locatedSql(page.sort, dim, page.order, present, reach))
        const rows = await run(db, { ...params, offset: page.offset, limit: page.limit })
        const total = rows[0]?.total ?? 0
        // A page past the end has only the total row, with every item column null.
        return { ...strip(rows[0]?.ord == null ? [] : rows), total }
      }
      // Read from the nearer end: the last pages of a large set cost what the first ones do.
      const run = cached(`walked:${page.sort}:${page.order}:${shape}`, () => walkedSql(page.sort, page.order, present))
      const rows = await heavyRead(db, async () => await run(db, { ...params, offset: page.offset, limit: page.limit }))
      const total = rows[0]?.total ?? 0
      // A page past the end has only the total row, with every item column null.
      return { ...strip(rows[0]?.ord == null ? [] : rows), total }
    }
  }
}

export type CollectionReader<S extends string, F extends string, Row extends object> = ReturnType<typeof createCollectionReader<S, F, Row>>
