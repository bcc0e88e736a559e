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

// Per database handle: its bound, and how many of its heavy reads run.
const handles = new WeakMap<object, { limit: LimitFunction, running: number }>()
const counts = { running: 0, waiting: 0 }

/**
 * Runs `read` when fewer than HEAVY_READS heavy reads run on `db`; `alone` tells it whether it is the only
 * one running there as it starts.
 */
export async function heavyRead<T> (db: object, read: (alone: boolean) => Promise<T>): Promise<T> {
  let handle = handles.get(db)
  if (handle === undefined) {
    handle = { limit: pLimit(HEAVY_READS), running: 0 }
    handles.set(db, handle)
  }
  const mine = handle
  counts.waiting++
  return await mine.limit(async () => {
    counts.waiting--
    counts.running++
    mine.running++
    try {
      return await read(mine.running === 1)
    } finally {
      counts.running--
      mine.running--
    }
  })
}

/**
 * A heavy read given `workMem` for its bitmaps, sorts and hashes, in a read-only transaction of its own
 * (the setting lasts as long as the transaction). With the server's default work_mem (4 MB), the bitmap
 * of a common search term's pages goes lossy past some 60,000 pages of the table, and then every row of
 * every page is checked again, not only the candidates. The memory is taken as needed, up to `workMem`.
 *
 * Only a read that starts alone may have parallel workers (as many as the server allows). Alone, they
 * finish it sooner on cores that would idle; beside other heavy reads they share the same busy cores and
 * add their own coordination: a common word's read took 4.4 core-seconds with two workers, 3.2 without.
 */
export async function heavyReadWithMemory<T> (db: Database, workMem: string, read: (tx: Database) => Promise<T>): Promise<T> {
  return await heavyRead(db, async (alone) => await db.transaction(async (tx) => {
    await tx.execute(alone
      ? sql`select set_config('work_mem', ${workMem}, true)`
      : sql`select set_config('work_mem', ${workMem}, true), set_config('max_parallel_workers_per_gather', '0', true)`)
    return await read(tx as unknown as Database)
  }, { accessMode: 'read only' }))
}

/** Heavy reads running and waiting, over every database handle of the process (for /metrics). */
export function heavyReadCounts (): { running: number, waiting: number } {
  return { ...counts }
}
