import { sql } from 'drizzle-orm'
import type { Database } from '../../db/client.js'
import { BACKGROUND, heavyRead } from '../../db/heavy-reads.js'
import { ANCHOR_BYTES } from '../../memory/budget.js'
import { MAX_LIMIT } from '../../schemas/pagination.js'
import { anchorSetRead, readVia } from '../deep-page-reads.js'
import { counted } from '../filters.js'
import { strip } from '../items.js'
import { scanOf } from '../order.js'
import { reachFor } from '../reach.js'
import type { PageRequest, PageResult } from '../request.js'
import type { Position, SortOrder } from '../cursor.js'
import type { CollectionSpec, PageRow } from '../spec.js'
import type { Statement } from '../../db/statement.js'
import { StatementSet } from '../statements.js'
import { AnchorCache, anchorFor, FOLLOW_REACH, followCandidates, followedAnchor, recordMoves, STRIDE, type AnchorOrigin, type Anchors, type FollowedAnchor } from './anchor-set.js'
import { anchorChunkSql, anchoredSql, followedSql, followSql, type AnchorChunk, type FollowedRow, type FollowRow } from './sql.js'
import { timelineOfVersion } from '../../db/failover/history.js'

// Deep pages from the anchors of their result set (./anchor-set.ts): a seek from the anchor before the
// page, skipping fewer than STRIDE rows. Exact because a set serves a page only when the page's own
// statement reads the version the set was read at; after rows were created, only when the page's own
// statement counts, from the change log, the same number of created rows before the anchor as the skip
// assumed. Any other write retires the set, and the page is read another way.

/** Where a chunk of anchors was read, when the table's changes are logged (its epoch is then read). */
const originOf = (chunk: AnchorChunk): AnchorOrigin | undefined =>
  chunk.epoch === null ? undefined : { snapshot: chunk.snap, top: chunk.top, epoch: chunk.epoch }

// Rows an anchor-reading statement walks: a multiple of STRIDE, so that each chunk ends on an anchor,
// and short so that a chunk stays far inside the statement timeout on a busy database too
// (docs/performance.md#anchors-of-deep-pages).
const ANCHOR_CHUNK = STRIDE * 256

// How long a deep page with no rank to fall back on (OFFSET would walk to it) waits for the next part
// of the anchors of its result set being read, rather than walking. It waits as long as the parts keep
// coming: on a large table an OFFSET walk of an unlocated sort runs into the statement timeout, and
// pages that gave up after one such wait walked while the anchors that would have served them were
// still being read (docs/performance.md#anchors-of-deep-pages).
const ANCHOR_WAIT_MS = 5000

/**
 * Waits while the set being read under `key` grows without reaching `offset`: until a part reaches it,
 * the read ends, or no part has come for ANCHOR_WAIT_MS.
 */
async function reached (cache: AnchorCache, key: string, offset: number): Promise<void> {
  for (;;) {
    const next = cache.progress(key)
    if (next === undefined) return
    let timer: NodeJS.Timeout | undefined
    const moved = await Promise.race([next.then(() => true), new Promise<boolean>((resolve) => { timer = setTimeout(resolve, ANCHOR_WAIT_MS, false) })])
    clearTimeout(timer)
    const now = cache.get(key)
    if (!moved || (now !== undefined && anchorFor(now, offset) !== undefined)) return
  }
}

export class AnchorReader<S extends string, F extends string, Row extends object> {
  // Per database handle: a replica's rows are at its own version.
  readonly #caches = new WeakMap<Database, AnchorCache>()
  readonly #chunks: StatementSet<AnchorChunk>

  constructor (private readonly spec: CollectionSpec<S, F>, private readonly pages: StatementSet<Row & PageRow>,
    private readonly chunkRows = ANCHOR_CHUNK) {
    if (chunkRows <= 0 || chunkRows % STRIDE !== 0) throw new RangeError(`anchorChunk must be a positive multiple of ${STRIDE}`)
    this.#chunks = new StatementSet<AnchorChunk>(`${spec.table}_anchors`)
  }

  /**
   * The anchors of a result set, read in chunks, all in one read-only repeatable-read transaction: one
   * snapshot, so that writes meanwhile (by anyone) are followed afterwards like any later write rather
   * than ending the read. Each chunk checks the version the first one read all the same (a set read
   * at two versions would be wrong). After each chunk but the last, the anchors so far are published,
   * when a page can read its total beside them. It takes one heavy-read slot for the whole transaction:
   * a slot taken per chunk would let transactions holding connections wait for slots held by walks
   * waiting for connections. No request owns it: it is the gate's background work, never refused.
   */
  async #read (db: Database, sort: S, order: SortOrder, present: F[], params: Record<string, unknown>,
    publish: (part: Anchors) => void): Promise<Anchors | undefined> {
    const started = performance.now()
    let anchors: Anchors | undefined
    try {
      anchors = await heavyRead(db, BACKGROUND, async () => await db.transaction(async (tx) => {
        // Without JIT: the estimates of a chunk's group walk (a descending sort by subject) priced it
        // past jit_optimize_above_cost, and compiling took several times as long as running the chunk
        // (docs/performance.md#anchors-of-deep-pages).
        await tx.execute(sql`select set_config('jit', 'off', true)`)
        return await this.#readChunks(tx, sort, order, present, params, publish)
      }, { isolationLevel: 'repeatable read', accessMode: 'read only' }))
      return anchors
    } finally {
      anchorSetRead({
        table: this.spec.table,
        sort,
        outcome: anchors === undefined ? 'abandoned' : 'complete',
        seconds: (performance.now() - started) / 1000,
        anchors: anchors?.ids.length ?? 0
      })
    }
  }

  async #readChunks (db: Database, sort: S, order: SortOrder, present: F[], params: Record<string, unknown>,
    publish: (part: Anchors) => void): Promise<Anchors | undefined> {
    const shape = present.join(',')
    const keys: Array<string | null> = []
    const ids: number[] = []
    let version: number | undefined
    let total = 0
    let after: Position | null = null
    for (;;) {
      let run: Statement<AnchorChunk>
      if (after === null) {
        run = this.#chunks.get(`anchors:${sort}:${order}:${shape}`, () => anchorChunkSql(this.spec, sort, order, present, undefined, this.chunkRows))
      } else {
        const keyNull = after.key === null
        const scan = scanOf({ ...after, direction: 'after' }, order)
        run = this.#chunks.get(`anchors-after:${sort}:${order}:${keyNull}:${shape}`, () => anchorChunkSql(this.spec, sort, order, present, { scan, keyNull }, this.chunkRows))
      }
      const [chunk] = await run(db, { ...params, k: after?.key, i: after?.id })
      if (chunk === undefined || (version !== undefined && chunk.version !== version)) return undefined
      version = chunk.version
      total += chunk.n
      keys.push(...JSON.parse(chunk.keys) as Array<string | null>)
      ids.push(...chunk.ids)
      if (chunk.n < this.chunkRows) return { version, total, keys, ids: Float64Array.from(ids), origin: originOf(chunk) }
      if (counted(this.spec, present)) publish({ version, total: null, keys: keys.slice(), ids: Float64Array.from(ids), origin: originOf(chunk) })
      after = { key: keys[keys.length - 1] ?? null, id: ids[ids.length - 1]! }
    }
  }

  /** The cache of `db`, the key of the page's result set in it, and the set held under that key. */
  #entry (db: Database, page: PageRequest<S>, params: Record<string, unknown>): { cache: AnchorCache, key: string, held: Anchors | undefined } {
    const cache = this.#cacheOf(db)
    const key = JSON.stringify([page.sort, page.order, params])
    return { cache, key, held: cache.get(key) }
  }

  /** Starts reading the page's set in the background, unless a read is under way or ended too recently; the read under way, if any. */
  #refresh (db: Database, page: PageRequest<S>, present: F[], params: Record<string, unknown>): Promise<void> | undefined {
    const { cache, key } = this.#entry(db, page, params)
    return cache.refresh(key, async (publish) => await this.#read(db, page.sort, page.order, present, params, publish))
  }

  /** The set held for the page's result set, if any: a strategy compares it before and after its statement, to see it replaced. */
  held (db: Database, page: PageRequest<S>, params: Record<string, unknown>): Anchors | undefined {
    return this.#entry(db, page, params).held
  }

  /** Whether a set is held for the page's result set, not known to be out of date, with an anchor at or before the page. */
  reaches (db: Database, page: PageRequest<S>, params: Record<string, unknown>): boolean {
    const { held } = this.#entry(db, page, params)
    return held !== undefined && held.behind !== true && anchorFor(held, page.offset) !== undefined
  }

  /** Whether the set held for the page's result set is known to be behind the table: a page read a newer version. */
  behind (db: Database, page: PageRequest<S>, params: Record<string, unknown>): boolean {
    return this.#entry(db, page, params).held?.behind === true
  }

  /**
   * Whether the page waits for anchors: none are held for its result set, or only parts of a set still
   * being read that do not serve it. A whole set that ends before the page is not waited for: the page
   * is then within a stride of the end, which a walk from the nearer end reaches cheaply.
   */
  awaits (db: Database, page: PageRequest<S>, params: Record<string, unknown>): boolean {
    const { held } = this.#entry(db, page, params)
    return held === undefined || (held.total === null && (held.behind === true || anchorFor(held, page.offset) === undefined))
  }

  /**
   * The page from the set held for its result set, as the set was read: when the page's own statement
   * reads the version the set was read at. Undefined otherwise: a replica behind the set (it will catch
   * up, nothing to read again); or a newer version, after which the set is marked behind, for pages to
   * follow the rows created since (`followWrites`, on the history the set was read on), or retired.
   */
  async asRead (db: Database, page: PageRequest<S>, present: F[], params: Record<string, unknown>, followWrites: boolean): Promise<PageResult<Row> | undefined> {
    const { cache, key, held } = this.#entry(db, page, params)
    const at = held === undefined || held.behind === true ? undefined : anchorFor(held, page.offset)
    if (held === undefined || at === undefined) return undefined
    const partial = held.total === null
    const found = await this.#fromAnchor(db, page, present, params, at, partial, STRIDE)
    const version = found[0]?.version ?? 0
    if (version === held.version) {
      readVia(this.spec.table, 'anchor', partial)
      // Read before strip(), which removes it from the rows.
      const total = held.total ?? found[0]?.total ?? 0
      return { ...strip(found[0]?.ord == null ? [] : found), total }
    }
    if (version < held.version) return undefined
    // Writes are followed only on the history the set was read on: after a failover the rows it
    // counted may be gone, and nothing logged says so.
    if (followWrites && held.origin !== undefined && timelineOfVersion(version) === timelineOfVersion(held.version)) held.behind = true
    else cache.retire(key, version)
    return undefined
  }

  /**
   * The page from a set that rows have been created since, following them (`#follow`). The set is
   * read again meanwhile (as paced), since the rows to follow only grow; when the writes cannot be
   * followed, it is retired. Undefined when this page cannot be followed.
   */
  async followed (db: Database, page: PageRequest<S>, present: F[], params: Record<string, unknown>): Promise<PageResult<Row> | undefined> {
    const { cache, key, held } = this.#entry(db, page, params)
    if (held?.behind !== true) return undefined
    const followed = await this.#follow(db, held, page, present, params)
    if (followed === 'retire') {
      cache.retire(key, Infinity)
      return undefined
    }
    if (followed !== undefined || held.total !== null) this.#refresh(db, page, present, params)
    return followed
  }

  /**
   * Starts reading the page's set (as paced) and waits while it grows without reaching the page: until
   * a part reaches it, the read ends, or no part has come for ANCHOR_WAIT_MS. False when no read is
   * under way to wait for.
   */
  async awaitSet (db: Database, page: PageRequest<S>, present: F[], params: Record<string, unknown>): Promise<boolean> {
    const reading = this.#refresh(db, page, present, params)
    if (reading === undefined) return false
    await reached(this.#cacheOf(db), this.#entry(db, page, params).key, page.offset)
    return true
  }

  /** Whether the anchors of the page's result set are being read now. */
  reading (db: Database, page: PageRequest<S>, params: Record<string, unknown>): boolean {
    const { cache, key } = this.#entry(db, page, params)
    return cache.building(key)
  }

  /** Starts reading the page's set again, as paced, without waiting for it. */
  refresh (db: Database, page: PageRequest<S>, present: F[], params: Record<string, unknown>): void {
    this.#refresh(db, page, present, params)
  }

  /** The anchor sets read on one database handle (a replica's rows are at its own version). */
  #cacheOf (db: Database): AnchorCache {
    let cache = this.#caches.get(db)
    if (cache === undefined) {
      cache = new AnchorCache(ANCHOR_BYTES)
      this.#caches.set(db, cache)
    }
    return cache
  }

  /** The page `at.skip` rows after an anchor, read with fewer than `stride` rows skipped, and the version. */
  async #fromAnchor (db: Database, page: PageRequest<S>, present: F[], params: Record<string, unknown>,
    at: { position: Position, skip: number }, partial: boolean, stride: number): Promise<Array<Row & PageRow>> {
    const keyNull = at.position.key === null
    const scan = scanOf({ ...at.position, direction: 'after' }, page.order)
    const reach = reachFor(at.skip + page.limit, stride - 1 + MAX_LIMIT)
    const name = `anchored:${page.sort}:${page.order}:${keyNull}:${partial}:${reach}:${present.join(',')}`
    const run = this.pages.get(name, () => anchoredSql(this.spec, page.sort, scan, keyNull, present, partial, reach))
    return await run(db, { ...params, k: at.position.key, i: at.position.id, skip: at.skip, limit: page.limit })
  }

  /**
   * A page from an anchor set that rows have been created since. The candidate anchors, moved by the
   * created rows before each (as earlier pages found, else as `followSql` reads), tell which one the
   * page starts after; the page is then read from it (`followedSql`) with the count of created rows
   * before it in the page's own snapshot.
   * When a write in between changed that count, the page is read again with the skip the new count
   * gives, a few times at most. A set still being read (which does not know its total) has the page's
   * statement read the total. 'retire' when the writes cannot be followed; undefined when this page
   * cannot be.
   */
  async #follow (db: Database, held: Anchors, page: PageRequest<S>, present: F[], params: Record<string, unknown>): Promise<PageResult<Row> | 'retire' | undefined> {
    const log = this.spec.changes
    const origin = held.origin
    if (log === undefined || origin === undefined) return 'retire'
    const partial = held.total === null
    const candidates = followCandidates(held, page.offset)
    if (candidates === undefined) return undefined
    const since = { snap: origin.snapshot, top: origin.top, epoch: origin.epoch }
    const measure = async (): Promise<FollowedAnchor | 'retire' | undefined> => {
      const moves = this.pages.get(`follow:${page.sort}:${page.order}:${present.join(',')}`, () => followSql(this.spec, page.sort, page.order, present, log))
      const [moved] = await moves(db, { ...params, ...since, near: JSON.stringify(candidates.near) }) as unknown as FollowRow[]
      if (moved === undefined || !moved.followed) return 'retire'
      recordMoves(held, candidates.first, moved.before)
      return followedAnchor(held, page.offset, candidates.first, moved.before)
    }
    // The counts earlier pages found near this one, if any; else they are read.
    const known = held.moved?.subarray(candidates.first, candidates.first + candidates.near.length)
    let guessed = known !== undefined
    let at = known === undefined ? undefined : followedAnchor(held, page.offset, candidates.first, known)
    if (at === undefined) {
      guessed = false
      const measured = await measure()
      if (measured === 'retire') return 'retire'
      at = measured
    }
    for (let attempt = 0; at !== undefined && attempt < 3; attempt++) {
      const keyNull = at.position.key === null
      const scan = scanOf({ ...at.position, direction: 'after' }, page.order)
      const reach = reachFor(at.skip + page.limit, FOLLOW_REACH - 1 + MAX_LIMIT)
      const run = this.pages.get(`followed:${page.sort}:${page.order}:${keyNull}:${partial}:${reach}:${present.join(',')}`, () => followedSql(this.spec, page.sort, scan, keyNull, page.order, present, log, partial, reach))
      const found = await run(db, { ...params, ...since, k: at.position.key, i: at.position.id, skip: at.skip, limit: page.limit }) as Array<Row & PageRow & FollowedRow>
      const head = found[0]
      if (head === undefined || !head.followed) return 'retire'
      recordMoves(held, at.index, [head.before])
      if (head.before === at.before) {
        readVia(this.spec.table, 'anchor', partial, true)
        // Read before strip(), which removes it from the rows.
        const total = held.total === null ? head.total ?? 0 : held.total + head.added
        return { ...strip(head.ord == null ? [] : found), total }
      }
      at = followedAnchor(held, page.offset, at.index, [head.before])
      if (at === undefined && guessed) {
        // The anchor guessed from earlier counts has moved past the page: read the counts near it.
        guessed = false
        const measured = await measure()
        if (measured === 'retire') return 'retire'
        at = measured
      }
    }
    return undefined
  }
}
