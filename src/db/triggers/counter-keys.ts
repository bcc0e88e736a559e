import { createHash } from 'node:crypto'

// The counter keys of pagination_counts (drizzle/0006), declared once: the trigger functions
// (./functions.ts) write them with the SQL built here, and the readers (src/pages/) look them up with
// the TypeScript built here, so the two cannot drift apart (test/db/triggers.test.ts runs both).

export interface CounterKey {
  /** What precedes `=` in the key. */
  readonly name: string
  /** Unbounded text is kept as its md5, so that a key stays short; other values as they are. */
  readonly hashed: boolean
  /** The key of the rows without a value, for a column that can be NULL and whose groups are ranked. */
  readonly none?: string
}

/**
 * Levels of each order-statistic dimension (drizzle/0006): a level-L bucket is the level-0 bucket >> 8L.
 * The triggers (./functions.ts) write every level; a located page (src/pages/locate.ts) reads down them.
 */
export const BUCKET_LEVELS = 4

/**
 * The levels a located page reads, from the top one down. The fourth level holds a single bucket until
 * ids pass 2^32 and times the year 2100, so the third is top enough: under it, a page still reads at
 * most 256 counts a level. The triggers keep writing the fourth until every instance reads three: an
 * instance of the release before reads four, and would locate no page without it. The next migration
 * then stops writing it, which takes 5 of a create's 24 counter rows away
 * (docs/performance.md#sitting-s11-creates-against-4b37ef6-at-1000000).
 */
export const READ_LEVELS = 3

/** The counted filters of each table, by the name of the filter. */
export const MESSAGE_KEYS = {
  priority: { name: 'priority', hashed: false },
  authorId: { name: 'author_id', hashed: false },
  subject: { name: 'subject', hashed: true, none: 'subject:none' }
} as const satisfies Record<string, CounterKey>

export const USER_KEYS = { role: { name: 'role', hashed: true } } as const satisfies Record<string, CounterKey>

export const MOVIE_KEYS = {
  genre: { name: 'genre', hashed: true },
  year: { name: 'year', hashed: false }
} as const satisfies Record<string, CounterKey>

/** The counter key of a value, as the triggers write it. */
export const keyOf = (key: CounterKey) => (value: string | number): string =>
  `${key.name}=${key.hashed ? createHash('md5').update(String(value)).digest('hex') : String(value)}`

/** SQL: the stored form of the value `expr` (its md5 for a hashed key). */
export const valueSql = (key: CounterKey, expr: string): string => key.hashed ? `md5(${expr})` : expr

/** SQL: the key of `stored`, a value already in the form valueSql gives it. */
export const prefixSql = (key: CounterKey, stored: string): string => `'${key.name}=' || ${stored}`

/** SQL: the key of the value `expr`; NULL, or the key's `none` when it has one, for a NULL value. */
export function keySql (key: CounterKey, expr: string): string {
  const keyed = prefixSql(key, valueSql(key, expr))
  return key.none === undefined ? keyed : `coalesce(${keyed}, '${key.none}')`
}
