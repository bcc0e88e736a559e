/** Every row of the benchmark, in the order they run, and the keys that name them on the command line. */
import type { Tokens } from '../run/caller-tokens.js'
import { EMBEDDED_LIVE_KEYS, LIVE_KEYS } from '../live/rows.js'
import { EVERYTHING, type Oracle } from '../checks/reference-sql.js'
import { SEEK_FLOOR_KEY } from '../database/seek-floor.js'
import type { Child } from '../servers/child-servers.js'
import { COLD_SORTS, coldRows, NEAR_DESC_KEY } from './cold.js'
import { healthRow, helloRow } from './fixed.js'
import { filteredRow, pageRows, searchRow } from './list.js'
import { mixRow } from './mix.js'
import { mobileRows } from './mobile.js'
import { postRows } from './post.js'
import type { Row, RowBuilder } from './row.js'
import { SEARCH_FLOOD_KEY, searchFloodRows } from './search-flood.js'
import { syncPollRow } from './sync-poll.js'
import { WRITTEN_SORTS, writtenRows } from './written.js'

// `sync` is the delta sync section (bench/delta-sync/section.ts), run between the rows rather than as one;
// `seek-floor` is PostgreSQL's own keyset seek of a page (bench/database/seek-floor.ts), measured after the
// rows by pgbench; the live keys are the live delivery section (bench/live/), run after every row.
export const ROW_KEYS = ['health', 'page1-25', 'middle-25', 'last-25', 'page1-100', 'middle-100', 'last-100', 'revalidate-25', 'gzip-25', 'cursor-25',
  'filtered', 'search', ...COLD_SORTS.map((sort) => sort.key), NEAR_DESC_KEY, 'random-search', 'common-words', SEEK_FLOOR_KEY, 'mix', ...WRITTEN_SORTS.map((sort) => sort.key), SEARCH_FLOOD_KEY, 'hello', 'post', 'post-idempotent', 'sync', 'sync-poll', ...LIVE_KEYS]
// The embedded database's run (no DATABASE_URL): the rows a first try of `npm start` would exercise.
export const EMBEDDED_ROWS = ['health', 'page1-25', 'filtered', 'search', ...COLD_SORTS.map((sort) => sort.key), 'random-search', 'post', ...EMBEDDED_LIVE_KEYS]

// The rows that write come after every row whose expectations are read before the load: the cold rows
// under writes after the read rows, then the search flood (its creates beside it), POST after those,
// and the delta sync poll last (see sync-poll.ts).
const ROW_BUILDERS: readonly RowBuilder[] = [
  healthRow, pageRows, mobileRows, filteredRow, searchRow, coldRows, mixRow, writtenRows, searchFloodRows, helloRow, postRows, syncPollRow
]

export async function buildRows (oracle: Oracle, keys: ReadonlySet<string>, tokens: Tokens, service: Child, maxRequests: number): Promise<Row[]> {
  const context = { oracle, wanted: (key: string) => keys.has(key), tokens, service, maxRequests, total: await oracle.count(EVERYTHING) }
  const rows: Row[] = []
  for (const build of ROW_BUILDERS) rows.push(...await build(context))
  return rows
}
