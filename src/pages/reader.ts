import type { Database } from '../db/client.js'
import type { Asker } from '../db/heavy-reads.js'
import { InvalidCursorError } from '../errors.js'
import { AnchorReader } from './anchors/reader.js'
import { filterParams, presentFilters } from './filters.js'
import { validKey } from './keys.js'
import type { PageRequest, PageResult } from './request.js'
import type { CollectionSpec, Companion, FilterValues, PageRow } from './spec.js'
import { StatementSet } from './statements.js'
import type { ReaderParts, StrategyName } from './strategies/strategy.js'
import { strategiesOff, type SwitchableStrategy } from './strategies/switches.js'
import { readPage } from './strategies/table.js'

// One implementation of reading a page of any collection, exact at any depth whoever writes
// (CONTRACT 7). Why every page is exact:
// 1. A page and its total are read by one statement, in one snapshot (./items.ts): no write can fall
//    between them.
// 2. The order is total: ties are broken by id (./order.ts), so a position names one place.
// 3. Totals come from the counters the triggers of drizzle/0006 keep in the writing transaction when
//    the filters are one counted value or none, else from count(*) (./filters.ts, ./items.ts).
// 4. Each way of reaching a page reads rows from that same snapshot. The ways are the strategies of
//    ./strategies/table.ts, tried in one declared order; ./README.md says why each exists.
// The reader below only checks the request and hands it to them.

export interface CollectionReaderOptions {
  /** Rows each statement reading anchors walks: a multiple of STRIDE (default: see ./anchors/reader.ts). */
  anchorChunk?: number
  /** false: no deep page is read from anchors, so that every one is located or walked (default true). */
  anchors?: boolean
  /** Strategies turned off for this reader (default: those PAGE_STRATEGIES_OFF names, ./README.md). */
  off?: readonly SwitchableStrategy[]
}

/** What a reader of `spec` keeps across pages, for the strategies to read from. */
export function readerParts<S extends string, F extends string, Row extends object> (spec: CollectionSpec<S, F>, options: CollectionReaderOptions = {}): ReaderParts<S, F, Row> {
  const pages = new StatementSet<Row & PageRow>(spec.table)
  const own: ReadonlySet<StrategyName> | undefined = options.off === undefined ? undefined : new Set(options.off)
  return {
    spec,
    pages,
    anchors: options.anchors === false ? undefined : new AnchorReader<S, F, Row>(spec, pages, options.anchorChunk),
    manyGroupsUntil: new WeakMap(),
    off: () => own ?? strategiesOff()
  }
}

export function createCollectionReader<S extends string, F extends string, Row extends object> (spec: CollectionSpec<S, F>, options: CollectionReaderOptions = {}) {
  const parts = readerParts<S, F, Row>(spec, options)

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
      return await readPage({ reader: parts, db, page, present, params: filterParams(spec, present, values), asker, companion })
    }
  }
}

export type CollectionReader<S extends string, F extends string, Row extends object> = ReturnType<typeof createCollectionReader<S, F, Row>>
