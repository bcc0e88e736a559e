import type { SQL } from 'drizzle-orm'
import type { Database } from '../../db/client.js'
import { heavyRead, type Asker } from '../../db/heavy-reads.js'
import type { AnchorReader } from '../anchors/reader.js'
import { strip } from '../items.js'
import type { PageRequest, PageResult } from '../request.js'
import type { CollectionSpec, Companion, PageRow } from '../spec.js'
import type { StatementSet } from '../statements.js'
import type { SwitchableStrategy } from './switches.js'

// The shape every way of reading a page shares (./table.ts tries them in order): when it applies, and
// how it reads. A read may still decline (undefined), when only running its statement shows that it
// cannot serve the page; the next strategy that applies is tried then.

export type StrategyName = 'cursor' | 'start' | 'walked' | SwitchableStrategy

/** What a collection reader keeps across pages: its statements, its anchors, and what it learnt of its sorts. */
export interface ReaderParts<S extends string, F extends string, Row extends object> {
  spec: CollectionSpec<S, F>
  pages: StatementSet<Row & PageRow>
  /** Absent when the reader was built without anchors. */
  anchors: AnchorReader<S, F, Row> | undefined
  /** For each handle, its grouped sorts with too many distinct keys to walk (../grouped.ts), until when. */
  manyGroupsUntil: WeakMap<Database, Map<S, number>>
  /** The strategies turned off for this reader (src/pages/README.md); read per page, as they may be set after it was built. */
  off: () => ReadonlySet<StrategyName>
}

/** One page to read: its request, the filters present and their placeholders, and who asks. */
export interface PageAsk<S extends string, F extends string, Row extends object> {
  reader: ReaderParts<S, F, Row>
  db: Database
  page: PageRequest<S>
  present: F[]
  params: Record<string, unknown>
  asker: Asker
  /** By cursor: a value to read in the page's snapshot in place of the total. */
  companion: Companion | undefined
}

export interface PageStrategy {
  readonly name: StrategyName
  /** Whether this way can read the page, from the request and what the reader holds, without reading the database. */
  applies: <S extends string, F extends string, Row extends object>(ask: PageAsk<S, F, Row>) => boolean
  /** The page and its exact total; undefined when its statement showed that this way cannot serve it. */
  read: <S extends string, F extends string, Row extends object>(ask: PageAsk<S, F, Row>) => Promise<PageResult<Row> | undefined>
}

/**
 * A page by number from the statement `name` (built by `build`); a page past the end has only the
 * total row. A walk is given `walkFor`: it is admitted as a heavy read for it (src/db/heavy-reads.ts).
 */
export async function readNumbered<S extends string, F extends string, Row extends object> (ask: PageAsk<S, F, Row>, name: string, build: () => SQL,
  params: Record<string, unknown>, walkFor?: Asker): Promise<PageResult<Row>> {
  const run = ask.reader.pages.get(name, build)
  const rows = walkFor === undefined ? await run(ask.db, params) : await heavyRead(ask.db, walkFor, async (_alone, signal) => await run(ask.db, params, signal))
  // Read before strip(), which removes it from the rows.
  const total = rows[0]?.total ?? 0
  return { ...strip(rows[0]?.ord == null ? [] : rows), total }
}
