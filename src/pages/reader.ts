import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { heavyRead, type Asker } from '../db/heavy-reads.js'
import { InvalidCursorError } from '../errors.js'
import { MAX_LIMIT } from '../schemas/pagination.js'
import { AnchorReader } from './anchors/reader.js'
import { beside } from './cursor.js'
import { readVia } from './deep-page-reads.js'
import { filterParams, presentFilters, rankedDim } from './filters.js'
import { groupedSql } from './grouped.js'
import { strip, totalSql } from './items.js'
import { validKey } from './keys.js'
import { locatedSql } from './locate.js'
import { NEAR_START, nearStartSql, startSoughtSql, walkedSql } from './numbered.js'
import { scanOf } from './order.js'
import { reachFor } from './reach.js'
import type { Cursor } from './cursor.js'
import type { PageRequest, PageResult } from './request.js'
import { BEFORE_FIRST_ID, seekSql } from './seek.js'
import type { CollectionSpec, Companion, FilterValues, GroupRank, PageRow } from './spec.js'
import { StatementSet } from './statements.js'

// One implementation of reading a page of any collection, exact at any depth whoever writes
// (CONTRACT 7). Why every page is exact:
// 1. A page and its total are read by one statement, in one snapshot (./items.ts): no write can fall
//    between them.
// 2. The order is total: ties are broken by id (./order.ts), so a position names one place.
// 3. Totals come from the counters the triggers of drizzle/0006 keep in the writing transaction when
//    the filters are one counted value or none, else from count(*) (./filters.ts, ./items.ts).
// 4. Each way of reaching a page reads rows from that same snapshot:
//    - near the start, and deep pages with nothing better, by OFFSET from the nearer end (./numbered.ts);
//      descending pages near the start of a sort with runs of ties, by a seek from before the first row;
//    - deep pages whose sort is ranked, located in the order-statistic buckets (./locate.ts), or with
//      few distinct keys, group by group (./grouped.ts);
//    - pages by cursor, a seek beyond the cursor's position on the (key, id) index (./seek.ts);
//    - deep pages whose result set has anchors, a seek from the anchor before them, used only when the
//      page's statement reads the version the anchors were read at, or counts from the change log
//      exactly the created rows the skip assumed (./anchors/).
// The reader below only chooses among them.

/** How long a handle whose grouped sort has too many distinct keys reads its deep pages another way. */
const MANY_GROUPS_MS = 60_000

export interface CollectionReaderOptions {
  /** Rows each statement reading anchors walks: a multiple of STRIDE (default: see ./anchors/reader.ts). */
  anchorChunk?: number
  /** false: no deep page is read from anchors, so that every one is located or walked (default true). */
  anchors?: boolean
}

export function createCollectionReader<S extends string, F extends string, Row extends object> (spec: CollectionSpec<S, F>, options: CollectionReaderOptions = {}) {
  const pages = new StatementSet<Row & PageRow>(spec.table)
  const anchors = options.anchors === false ? undefined : new AnchorReader<S, F, Row>(spec, pages, options.anchorChunk)
  // For each handle, its grouped sorts with too many distinct keys to walk (./grouped.ts), until when.
  const manyGroupsUntil = new WeakMap<Database, Map<S, number>>()

  /** How `sort`'s unfiltered pages are located group by group on `db`; undefined when they are not. */
  function groupRankOf (db: Database, sort: S, present: F[]): GroupRank | undefined {
    if (present.length > 0 || (manyGroupsUntil.get(db)?.get(sort) ?? 0) > performance.now()) return undefined
    return spec.groupRanked?.[sort]
  }

  /**
   * Whether a page near the start is sought run by run (./numbered.ts): descending by a grouped sort,
   * whose ties run against its index, unfiltered or under filters that lead an index before its key.
   */
  function soughtFromStart (page: PageRequest<S>, present: F[]): boolean {
    if (page.order !== 'desc' || spec.grouped?.includes(page.sort) !== true) return false
    const leading = spec.walkFilters?.[page.sort] ?? []
    return present.every((filter) => leading.includes(filter))
  }

  /**
   * A page by cursor: up to `limit` rows beyond it, whether any lie the other way, and the total (or
   * `companion`). Under filters its index does not lead with, the seek walks until it has a page: it
   * runs with `signal`, so that it stops when its client has gone. Unfiltered, it reads `limit` rows of
   * the sort's index and needs none.
   */
  async function seek (db: Database, cursor: Cursor, page: PageRequest<S>, present: F[], params: Record<string, unknown>, signal: AbortSignal | undefined, companion?: Companion): Promise<PageResult<Row>> {
    const scan = scanOf(cursor, page.order)
    const keyNull = cursor.key === null
    // One more row than the page, to learn whether more follow.
    const reach = reachFor(page.limit + 1, MAX_LIMIT + 1)
    const name = `seek:${page.sort}:${scan.keyDesc}:${scan.idDesc}:${keyNull}:${reach}:${present.join(',')}:${companion?.name ?? ''}`
    const total = companion === undefined ? totalSql(spec, present) : sql`SELECT ${companion.sql}::float8 AS total`
    const run = pages.get(name, () => seekSql(spec, page.sort, scan, keyNull, present, total, reach))
    const check = beside(cursor, page.sort, page.order, cursor.direction === 'after' ? 'after' : 'before')
    const found = await run(db, { ...params, k: cursor.key, i: cursor.id, ci: check.id, skip: 0, limit: page.limit + 1 }, signal)
    const other = found[0]?.other === true
    const counted = found[0]?.total ?? 0
    const { rows, keys } = strip(found[0]?.ord == null ? [] : found)
    const more = rows.length > page.limit
    if (more) {
      rows.pop()
      keys.pop()
    }
    if (cursor.direction === 'after') return { rows, keys, total: counted, before: other, after: more }
    return { rows: rows.reverse(), keys: keys.reverse(), total: counted, before: more, after: other }
  }

  /**
   * A page by number, from the statement `name` (built by `build`); a page past the end has only the
   * total row. A walk is given `walkFor`: it is admitted as a heavy read for it (src/db/heavy-reads.ts).
   */
  async function numbered (db: Database, name: string, build: () => ReturnType<typeof nearStartSql>, params: Record<string, unknown>, walkFor?: Asker): Promise<PageResult<Row>> {
    const run = pages.get(name, build)
    const rows = walkFor === undefined ? await run(db, params) : await heavyRead(db, walkFor, async (_alone, signal) => await run(db, params, signal))
    // Read before strip(), which removes it from the rows.
    const total = rows[0]?.total ?? 0
    return { ...strip(rows[0]?.ord == null ? [] : rows), total }
  }

  /**
   * A deep page located group by group (./grouped.ts); undefined when the column has too many distinct
   * keys for that, which is then not tried again on this handle for MANY_GROUPS_MS.
   */
  async function grouped (db: Database, page: PageRequest<S>, group: GroupRank, params: Record<string, unknown>): Promise<PageResult<Row> | undefined> {
    const reach = reachFor(page.limit, MAX_LIMIT)
    const run = pages.get(`grouped:${page.sort}:${page.order}:${reach}`, () => groupedSql(spec, page.sort, group, page.order, reach))
    const rows = await run(db, params)
    if (rows[0]?.complete === false) {
      const until = manyGroupsUntil.get(db) ?? new Map<S, number>()
      manyGroupsUntil.set(db, until.set(page.sort, performance.now() + MANY_GROUPS_MS))
      return undefined
    }
    // Read before strip(), which removes it from the rows.
    const total = rows[0]?.total ?? 0
    return { ...strip(rows[0]?.ord == null ? [] : rows), total }
  }

  /** A page at NEAR_START or deeper: from anchors, else located by rank or by group, else walked from the nearer end. */
  async function deep (db: Database, page: PageRequest<S>, present: F[], params: Record<string, unknown>, asker: Asker): Promise<PageResult<Row>> {
    const shape = present.join(',')
    const dim = rankedDim(spec, page.sort, present)
    const group = dim === undefined ? groupRankOf(db, page.sort, present) : undefined
    // A page its anchors do not reach yet waits for them only when nothing else can locate it.
    const fromAnchor = await anchors?.page(db, page, present, params, dim === undefined, dim === undefined && group === undefined)
    if (fromAnchor !== undefined) return fromAnchor
    const at = { ...params, offset: page.offset, limit: page.limit }
    if (group !== undefined) {
      const found = await grouped(db, page, group, at)
      if (found !== undefined) {
        readVia(spec.table, 'rank')
        return found
      }
    }
    readVia(spec.table, dim === undefined ? 'offset' : 'rank')
    if (dim !== undefined) {
      const reach = reachFor(page.limit, MAX_LIMIT)
      return await numbered(db, `located:${page.sort}:${page.order}:${reach}:${shape}`, () => locatedSql(spec, page.sort, dim, page.order, present, reach), at)
    }
    return await numbered(db, `walked:${page.sort}:${page.order}:${shape}`, () => walkedSql(spec, page.sort, page.order, present), at, asker)
  }

  return {
    /** The filters present, or null when one of them can match no row at all. */
    present: (values: FilterValues<F>): F[] | null => presentFilters(spec, values),

    /**
     * A page and its exact total, for `asker` (a deep page the database must walk is admitted for it).
     * By cursor, `companion` may name another value to read in the page's snapshot in place of the
     * total, for a caller that knows the total another way.
     */
    async read (db: Database, values: FilterValues<F>, page: PageRequest<S>, asker: Asker, companion?: Companion): Promise<PageResult<Row>> {
      if (page.cursor !== null && !validKey(page.cursor.key, spec.keys[page.sort])) throw new InvalidCursorError()
      const present = presentFilters(spec, values)
      if (present === null) return { rows: [], total: 0, keys: [], before: false, after: false }
      const params = filterParams(spec, present, values)
      if (page.cursor !== null) return await seek(db, page.cursor, page, present, params, present.length > 0 ? asker.signal : undefined, companion)
      if (page.offset >= NEAR_START) return await deep(db, page, present, params, asker)
      if (soughtFromStart(page, present)) {
        const reach = reachFor(page.offset + page.limit, NEAR_START + MAX_LIMIT)
        return await numbered(db, `start-sought:${page.sort}:${reach}:${present.join(',')}`, () => startSoughtSql(spec, page.sort, present, reach),
          { ...params, i: BEFORE_FIRST_ID, skip: page.offset, limit: page.limit })
      }
      return await numbered(db, `start:${page.sort}:${page.order}:${present.join(',')}`, () => nearStartSql(spec, page.sort, page.order, present),
        { ...params, offset: page.offset, limit: page.limit })
    }
  }
}

export type CollectionReader<S extends string, F extends string, Row extends object> = ReturnType<typeof createCollectionReader<S, F, Row>>
