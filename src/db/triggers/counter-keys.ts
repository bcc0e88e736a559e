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
 * The triggers (./functions.ts) write every level, and a located page (src/pages/locate.ts) reads down
 * them, at most 256 counts a level while ids stay under 2^32 and times before the year 2100 (past them,
 * the top level reads more, still exact). drizzle/0019 stopped writing a fourth, which held one bucket.
 */
export const BUCKET_LEVELS = 3

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
