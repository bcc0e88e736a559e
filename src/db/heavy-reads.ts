import { sql } from 'drizzle-orm'
import pLimit, { type LimitFunction } from 'p-limit'
import type { Database } from './client.js'

/**
 * Reads that walk many rows hold a database connection for as long as they run: a page found by
 * walking OFFSET rows, the matching ids of a search term, a chunk of anchors. Fifty concurrent deep
 * pages by subject on a table being written took every connection of the pool, and a create waited
 * behind them for more than 10 s. At most HEAVY_READS of them run at once per database handle (the
 * primary, each replica); the others wait here rather than in the pool's queue, so that writes and
 * short reads still find a connection: two of the default pool of ten. A bound of four measured
 * better for single kinds of walk but made the random mix of pages and searches a third slower.
 */
export const HEAVY_READS = 8

const limits = new WeakMap<object, LimitFunction>()
const counts = { running: 0, waiting: 0 }

/** Runs `read` when fewer than HEAVY_READS heavy reads run on `db`. */
export async function heavyRead<T> (db: object, read: () => Promise<T>): Promise<T> {
  let limit = limits.get(db)
  if (limit === undefined) {
    limit = pLimit(HEAVY_READS)
    limits.set(db, limit)
  }
  counts.waiting++
  return await limit(async () => {
    counts.waiting--
    counts.running++
    try {
      return await read()
    } finally {
      counts.running--
    }
  })
}

/**
 * A heavy read given `workMem` for its bitmaps, sorts and hashes, in a read-only transaction of its own
 * (the setting lasts as long as the transaction). With the server's default work_mem (4 MB), the bitmap
 * of a common search term's pages goes lossy past some 60,000 pages of the table, and then every row of
 * every page is checked again, not only the candidates. The memory is taken as needed, up to `workMem`.
 */
export async function heavyReadWithMemory<T> (db: Database, workMem: string, read: (tx: Database) => Promise<T>): Promise<T> {
  return await heavyRead(db, async () => await db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('work_mem', ${workMem}, true)`)
    return await read(tx as unknown as Database)
  }, { accessMode: 'read only' }))
}

/** Heavy reads running and waiting, over every database handle of the process (for /metrics). */
export function heavyReadCounts (): { running: number, waiting: number } {
  return { ...counts }
}
