/**
 * Values by key, bounded by the sum of their sizes (bytes, ids: whatever the owner counts), the least
 * recently used going first. The one eviction policy of every cache in the service; the bounds are in
 * src/memory/budget.ts.
 */
export class SizedLru<V> {
  // A Map iterates in insertion order: re-inserting a key on use keeps the oldest first.
  readonly #entries = new Map<string, { value: V, size: number }>()
  readonly #max: number
  readonly #largest: number
  #held = 0

  /** `largest`: a value bigger than this is not kept at all (default: the whole bound). */
  constructor (max: number, largest = max) {
    this.#max = max
    this.#largest = largest
  }

  /** The sum of the sizes held. */
  get held (): number {
    return this.#held
  }

  /** How many values are held. */
  get count (): number {
    return this.#entries.size
  }

  /** The value, now the most recently used. */
  get (key: string): V | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    this.#entries.delete(key)
    this.#entries.set(key, entry)
    return entry.value
  }

  /** The value, without counting as a use. */
  peek (key: string): V | undefined {
    return this.#entries.get(key)?.value
  }

  set (key: string, value: V, size: number): void {
    this.delete(key)
    if (size > this.#largest) return
    this.#entries.set(key, { value, size })
    this.#held += size
    for (const [oldest, entry] of this.#entries) {
      if (this.#held <= this.#max) break
      this.#entries.delete(oldest)
      this.#held -= entry.size
    }
  }

  delete (key: string): void {
    const entry = this.#entries.get(key)
    if (entry === undefined) return
    this.#entries.delete(key)
    this.#held -= entry.size
  }
}
