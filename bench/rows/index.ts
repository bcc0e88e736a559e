/** Every row of the benchmark, in the order they run, and the keys that name them on the command line. */
import type { Tokens } from '../run/caller-tokens.js'
import { EMBEDDED_LIVE_KEYS, LIVE_KEYS } from '../live/rows.js'
import type { Answers } from '../checks/answer-checks.js'
import type { Oracle } from '../checks/reference-sql.js'
import { SEEK_FLOOR_KEY } from '../database/seek-floor.js'
import type { Server } from '../servers/child-servers.js'
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

/**
 * What a row needs beyond a service to ask, for a target (--target: a deployment the benchmark did not
 * start), where a row whose need is not met is skipped and the table says why:
 * - `database`: the benchmark's own reader of the database (the floor, exact checks under writes, the
 *   statements still running), which a target's is not;
 * - `process`: the service as a process of this machine (its memory, client addresses bound on loopback);
 * - `writes`: it creates messages, so it runs only with --allow-writes;
 * - `token`: it calls as a user, so it needs tokens (--token-file, or --idp).
 * The peers (the naive baseline, the ceiling, the Platformatic peer) run only beside a database of the
 * benchmark's own: on a target every row measures the service alone. Rows not named here need nothing;
 * there their answers are checked for their shape, not against the database (bench/checks/answer-checks.ts).
 */
export type Need = 'database' | 'process' | 'writes' | 'token'
interface RowNeeds { needs: readonly Need[], why?: string }

const LIVE_NEEDS: RowNeeds = { needs: ['database', 'process', 'writes', 'token'], why: 'live delivery counts every change against the database and samples the service\'s memory' }
export const ROW_NEEDS: Readonly<Record<string, RowNeeds>> = {
  [SEEK_FLOOR_KEY]: { needs: ['database'], why: 'the database\'s floor is PostgreSQL\'s own seek, run by pgbench on the database' },
  mix: { needs: ['database', 'process'], why: 'its paths come from the database\'s counts per filter, and its figure is the service\'s memory' },
  ...Object.fromEntries(WRITTEN_SORTS.map((sort) => [sort.key, { needs: ['database', 'writes', 'token'], why: 'its pages are checked against the database while it writes' }])),
  [SEARCH_FLOOD_KEY]: { needs: ['database', 'process', 'writes', 'token'], why: 'its clients are loopback addresses of this machine, and it reads the database\'s running statements' },
  hello: { needs: ['token'] },
  post: { needs: ['writes', 'token'] },
  'post-idempotent': { needs: ['writes', 'token'] },
  sync: { needs: ['database', 'writes', 'token'], why: 'the delta sync section checks every change against the database' },
  ...Object.fromEntries(LIVE_KEYS.map((key) => [key, LIVE_NEEDS]))
}

/** Why a row cannot run with what is at hand (`met`), or undefined when it can. */
export function unmetNeed (key: string, met: ReadonlySet<Need>): string | undefined {
  const { needs, why } = ROW_NEEDS[key] ?? { needs: [] }
  const unmet = needs.filter((need) => !met.has(need))
  if (unmet.includes('database') || unmet.includes('process')) return `needs the benchmark's own database and service: ${why ?? ''}`
  if (unmet.includes('writes')) return 'writes: run with --allow-writes'
  if (unmet.includes('token')) return 'needs tokens: --token-file, or --idp with a development identity provider'
  return undefined
}

// The rows that write come after every row whose expectations are read before the load: the cold rows
// under writes after the read rows, then the search flood (its creates beside it), POST after those,
// and the delta sync poll last (see sync-poll.ts).
const ROW_BUILDERS: readonly RowBuilder[] = [
  healthRow, pageRows, mobileRows, filteredRow, searchRow, coldRows, mixRow, writtenRows, searchFloodRows, helloRow, postRows, syncPollRow
]

export interface RowPlan {
  /** None on a target: see ROW_NEEDS. */
  oracle?: Oracle
  answers: Answers
  keys: ReadonlySet<string>
  tokens: Tokens
  service: Server
  maxRequests: number
}

export async function buildRows ({ oracle, answers, keys, tokens, service, maxRequests }: RowPlan): Promise<Row[]> {
  const context = { oracle, answers, wanted: (key: string) => keys.has(key), tokens, service, maxRequests, total: await answers.total() }
  const rows: Row[] = []
  for (const build of ROW_BUILDERS) rows.push(...await build(context))
  return rows
}
