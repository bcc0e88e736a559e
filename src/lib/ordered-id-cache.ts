/**
 * The ordered ids of a result set, remembered with the version of the table they were read at.
 * An entry is only ever served after the caller has read the table's current version in the same
 * snapshot as the page's rows and found it equal (CONTRACT 7), so a write by anyone, anywhere,
 * retires it. Bounded by the number of ids held; the least recently used entries go first.
 */
export interface OrderedIds {
  version: number
  ids: Float64Array
}

export class OrderedIdCache {
  readonly #entries = new Map<string, OrderedIds>()
  readonly #maxIds: number
  #held = 0

  constructor (maxIds: number) {
    this.#maxIds = maxIds
  }

  get (key: string): OrderedIds | undefined {
    const entry = this.#entries.get(key)
    if (entry !== undefined) {
      // Re-inserting moves the key to the young end of the Map's order.
      this.#entries.delete(key)
      this.#entries.set(key, entry)
    }
    return entry
  }

  set (key: string, entry: OrderedIds): void {
    this.delete(key)
    if (entry.ids.length > this.#maxIds) return
    this.#entries.set(key, entry)
    this.#held += entry.ids.length
    for (const [oldest, old] of this.#entries) {
      if (this.#held <= this.#maxIds) break
      this.#entries.delete(oldest)
      this.#held -= old.ids.length
    }
  }

  delete (key: string): void {
    const entry = this.#entries.get(key)
    if (entry === undefined) return
    this.#entries.delete(key)
    this.#held -= entry.ids.length
  }
}
