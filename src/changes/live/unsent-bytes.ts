// What live streams hold for their clients, over all streams (CONTRACT 13, "Limits and faults"): each
// stream reports the bytes it has written that its client has not taken yet, and a read of the next
// answer for streams that are catching up waits while the total is at its bound. So a stream's own
// bound (LIVE_MAX_BUFFER_BYTES and one answer) does not multiply by the number of slow streams.

interface Waiting { bytes: number, resolve: (release: () => void) => void }

export class UnsentBytes {
  #held = 0
  readonly #waiting: Waiting[] = []

  constructor (readonly limit: number) {}

  /** Bytes held now: unsent by streams, and reserved by reads in progress. */
  get held (): number {
    return this.#held
  }

  /** Reads waiting for room. */
  get waiting (): number {
    return this.#waiting.length
  }

  /** A stream's unsent bytes grew (positive) or were taken by its client (negative). */
  adjust (delta: number): void {
    this.#held += delta
    while (this.#held < this.limit && this.#waiting.length > 0) {
      const next = this.#waiting.shift()!
      next.resolve(this.#take(next.bytes))
    }
  }

  /**
   * Room for an answer of up to `bytes`, reserved until the returned function is called: at once while
   * fewer than `limit` bytes are held, else once clients have read enough, first come first served.
   */
  async reserve (bytes: number): Promise<() => void> {
    if (this.#held < this.limit && this.#waiting.length === 0) return this.#take(bytes)
    return await new Promise((resolve) => { this.#waiting.push({ bytes, resolve }) })
  }

  #take (bytes: number): () => void {
    this.#held += bytes
    let released = false
    return () => {
      if (released) return
      released = true
      this.adjust(-bytes)
    }
  }
}
