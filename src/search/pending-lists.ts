import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { statement } from '../db/statement.js'

/**
 * How often the search indexes' pending lists are merged (drizzle/0014): often enough that content's
 * trigram list stays below its 32 MB limit at the create rates measured
 * (docs/performance.md#search-reads), while each merge still takes thousands of messages at once, which
 * is what makes it cheap.
 */
export const MERGE_PENDING_LISTS_EVERY_MS = 5_000

const merge = statement<{ pages: number }>('search_pending_lists_merge', sql`SELECT search_pending_lists_merge()::float8 AS pages`)

/**
 * Merges the GIN indexes' pending lists of new messages into their posting trees, so that no create
 * waits for a merge of the list it overflowed. Returns the pages merged (0 when another instance is
 * merging). Primary only: a standby cannot write an index.
 */
export async function mergePendingLists (db: Database): Promise<number> {
  const [row] = await merge(db, {})
  return row?.pages ?? 0
}
