import { SizedLru } from './sized-lru.js'

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
  readonly #entries: SizedLru<OrderedIds>

  constructor (maxIds: number) {
    this.#entries = new SizedLru(maxIds)
  }

  get (key: string): OrderedIds | undefined {
    return this.#entries.get(key)
  }

  set (key: string, entry: OrderedIds): void {
    this.#entries.set(key, entry, entry.ids.length)
  }

  delete (key: string): void {
    this.#entries.delete(key)
  }
}
