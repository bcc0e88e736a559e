import type { Position } from '../cursor.js'
import { SizedLru } from '../../memory/sized-lru.js'

// Every STRIDE-th position of a sorted result set, read at one version of its table: a page at any
// offset is then a seek from the nearest anchor at or before it, skipping fewer than STRIDE rows, and
// needs neither OFFSET over the rows before it nor the order-statistic counters. An anchor set is
// used as it is only when the page's own statement reads the same version (CONTRACT 7). After rows
// are created, a page follows them: each anchor has moved by the created rows sorting before it,
// which the page's statement counts from the table's change log, and the page is a seek from the
// latest anchor at or before it. Writes it cannot follow (an older row updated or deleted, too many
// rows) retire the set; it is read again, at most as often as `AnchorCache` allows. A set is usable
// while it is being read: the anchors read so far place the pages they reach, and such a page reads
// the total in its own statement, since the set does not know it yet.

export const STRIDE = 256

export interface Anchors {
  version: number
  /** The number of rows of the result set at that version; null while the set is still being read. */
  total: number | null
  /** The sort key (as a cursor carries it) and id of the rows at positions STRIDE - 1, 2 * STRIDE - 1, ... */
  keys: Array<string | null>
  ids: Float64Array
  /** Where the set was read, so that it can follow the rows created since (absent: it cannot). */
  origin?: AnchorOrigin
  /** Set once a page has read a newer version: the next pages follow the writes rather than try the set as it is. */
  behind?: boolean
  /**
   * The count of created rows before each anchor that the last page to read it found (NaN: none has).
   * Counts only grow, and a page's statement checks the one it assumed, so the next page near it
   * assumes the same count and needs no statement to find it.
   */
  moved?: Float64Array
}

/**
 * The snapshot a set was read in (pg_current_snapshot() as text), the highest id of the table then,
 * and the epoch of its change log (a TRUNCATE starts a new one and empties the log).
 */
export interface AnchorOrigin { snapshot: string, top: number, epoch: number }

// A set follows at most FOLLOW_MAX rows written since it was read: enough for a few minutes of a
// steady writer between two reads of the set, and few enough that reading them costs a page little.
export const FOLLOW_MAX = 1024

// A followed page starts from an anchor fewer than FOLLOW_REACH rows before it: created rows between
// two anchors push the page further from the anchor before it than a stride.
export const FOLLOW_REACH = 2 * STRIDE

/** Records the counts of created rows before the anchors from index `first` (see `Anchors.moved`). */
export function recordMoves (anchors: Anchors, first: number, before: ArrayLike<number>): void {
  if (anchors.moved === undefined) anchors.moved = new Float64Array(anchors.ids.length).fill(Number.NaN)
  for (let n = 0; n < before.length && first + n < anchors.moved.length; n++) anchors.moved[first + n] = before[n]!
}

/**
 * The anchors that may start the page at `offset` once rows have been created since the set was read:
 * each anchor moves later by the created rows that sort before it, at most FOLLOW_MAX, so the page
 * starts after one of the FOLLOW_MAX / STRIDE anchors before the one it would start after without them,
 * or after that one. Returns the index of the first and the anchors, in order.
 */
export function followCandidates (anchors: Anchors, offset: number): { first: number, near: Array<[string | null, number]> } | undefined {
  const last = Math.min(Math.floor(offset / STRIDE) - 1, anchors.ids.length - 1)
  if (last < 0) return undefined
  const first = Math.max(0, last - FOLLOW_MAX / STRIDE)
  const near: Array<[string | null, number]> = []
  for (let index = first; index <= last; index++) near.push([anchors.keys[index] ?? null, anchors.ids[index]!])
  return { first, near }
}

/**
 * The latest of the candidate anchors (from index `first`) at or before `offset` once each has moved
 * by the created rows before it (`before`, in the order of the candidates; NaN: not known): its index,
 * position, the rows after it to skip, and the count it assumed. Undefined when none is, or when the
 * page starts FOLLOW_REACH rows or more after it.
 */
export function followedAnchor (anchors: Anchors, offset: number, first: number, before: ArrayLike<number>): FollowedAnchor | undefined {
  for (let n = before.length - 1; n >= 0; n--) {
    const index = first + n
    const at = (index + 1) * STRIDE + before[n]!
    if (Number.isNaN(at) || at > offset) continue
    const skip = offset - at
    if (skip >= FOLLOW_REACH) return undefined
    return { index, position: { key: anchors.keys[index] ?? null, id: anchors.ids[index]! }, skip, before: before[n]! }
  }
  return undefined
}

export interface FollowedAnchor { index: number, position: Position, skip: number, before: number }

/** The position after which the page at `offset` starts, and how many rows after it to skip. */
export function anchorFor (anchors: Anchors, offset: number): { position: Position, skip: number } | undefined {
  const index = Math.floor(offset / STRIDE) - 1
  if (index < 0 || index >= anchors.ids.length) return undefined
  return { position: { key: anchors.keys[index] ?? null, id: anchors.ids[index]! }, skip: offset - (index + 1) * STRIDE }
}

/** Heap bytes of an anchor set: 8 per id and 8 per count of `moved`, each key string with its slot in the array, and its origin. */
export function anchorBytes (anchors: Anchors): number {
  // `moved` is allocated once the set is followed: counted from the start, so that the cache's bound holds.
  let size = 200 + anchors.ids.length * 16 + (anchors.origin === undefined ? 0 : 64 + anchors.origin.snapshot.length)
  for (const key of anchors.keys) size += key === null ? 8 : 24 + key.length
  return size
}

/**
 * Anchor sets by result set (sort, order and filter values), least recently used first out, bounded by
 * bytes. Reading a set scans its whole result set once, so it is read by one request at a time per
 * key, in the background, and again only after a pause several times as long as its last read took:
 * under a stream of writes, at most a tenth of the database's time goes to reading anchors, and pages
 * are meanwhile read the way they are without them.
 */
export class AnchorCache {
  readonly #entries: SizedLru<Anchors>
  readonly #building = new Map<string, Promise<void>>()
  readonly #progress = new Map<string, { next: Promise<void>, signal: () => void }>()
  readonly #lastCost = new Map<string, { ended: number, took: number }>()
  readonly #clock: () => number

  constructor (maxBytes: number, clock: () => number = Date.now) {
    this.#entries = new SizedLru(maxBytes)
    this.#clock = clock
  }

  /** Bytes the sets held now take. */
  get heldBytes (): number {
    return this.#entries.held
  }

  get (key: string): Anchors | undefined {
    return this.#entries.get(key)
  }

  /** Forgets `key`'s set when a page read a newer version than it holds (any version: Infinity). */
  retire (key: string, version: number): void {
    const entry = this.#entries.peek(key)
    if (entry !== undefined && entry.version < version) this.#entries.delete(key)
  }

  /**
   * Starts `read` for `key` unless one is running or the last one ended too recently. The read may
   * `publish` the part it has read so far (a set whose total is null), which is held, and replaced by
   * the next part, until the read ends. A read that fails or answers undefined (a write landed while it
   * ran) leaves no set, not even its parts. Returns the read under way (settling when it has ended,
   * however it ended), or undefined when none is.
   */
  refresh (key: string, read: (publish: (part: Anchors) => void) => Promise<Anchors | undefined>): Promise<void> | undefined {
    const running = this.#building.get(key)
    if (running !== undefined) return running
    const now = this.#clock()
    const last = this.#lastCost.get(key)
    if (last !== undefined && now - last.ended < 9 * last.took) return undefined
    const publish = (part: Anchors): void => {
      if (!this.#building.has(key)) return
      // A whole set, even one following writes, serves more pages than a part of a newer one.
      if (this.#entries.peek(key)?.total != null) return
      this.#entries.set(key, part, anchorBytes(part))
      this.#signal(key)
    }
    const done = read(publish).then((anchors) => anchors, () => undefined).then((anchors) => {
      if (anchors !== undefined) this.#entries.set(key, anchors, anchorBytes(anchors))
      else if (this.#entries.peek(key)?.total === null) this.#entries.delete(key)
    }).finally(() => {
      const ended = this.#clock()
      this.#lastCost.set(key, { ended, took: ended - now })
      this.#building.delete(key)
      this.#signal(key)
      // The costs are only a pacing hint: keep them for the keys still held or being read.
      if (this.#lastCost.size > 4 * (this.#entries.count + this.#building.size) + 64) {
        for (const name of this.#lastCost.keys()) if (this.#entries.peek(name) === undefined && !this.#building.has(name)) this.#lastCost.delete(name)
      }
    })
    this.#building.set(key, done)
    return done
  }

  /** Whether a read of `key` is under way. */
  building (key: string): boolean {
    return this.#building.has(key)
  }

  /** Settles when the read of `key` under way publishes its next part or ends; undefined when none is under way. */
  progress (key: string): Promise<void> | undefined {
    if (!this.#building.has(key)) return undefined
    let waiting = this.#progress.get(key)
    if (waiting === undefined) {
      let signal = (): void => {}
      const next = new Promise<void>((resolve) => { signal = resolve })
      waiting = { next, signal }
      this.#progress.set(key, waiting)
    }
    return waiting.next
  }

  #signal (key: string): void {
    const waiting = this.#progress.get(key)
    if (waiting === undefined) return
    this.#progress.delete(key)
    waiting.signal()
  }

  /** Resolves when every read started so far has ended (for tests and shutdown). */
  async settled (): Promise<void> {
    await Promise.all(this.#building.values())
  }
}
