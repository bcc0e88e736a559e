/**
 * Tokens this process has verified, by the token string itself, until they expire. A hit still asks
 * the key resolver for the token's key (a map lookup while the key set is cached) and must get the same
 * key back, so a key that leaves the key set retires every token it verified. Keyed by the whole token:
 * no digest per request and no collision to reason about.
 */
export interface VerifiedToken<User> {
  user: User
  header: { alg?: unknown, kid?: unknown }
  /** The PEM key that verified it. */
  pem: string
  /** Epoch ms until which it is served: exp plus the clock tolerance, capped by the maximum age. */
  until: number
}

export class VerifiedTokens<User> {
  readonly #entries = new Map<string, VerifiedToken<User>>()
  readonly #max: number

  constructor (max: number) {
    this.#max = max
  }

  /** The entry for `token` while it is valid at `now`; an expired one is dropped. */
  get (token: string, now: number): VerifiedToken<User> | undefined {
    const entry = this.#entries.get(token)
    if (entry === undefined) return undefined
    if (now < entry.until) return entry
    this.#entries.delete(token)
    return undefined
  }

  set (token: string, entry: VerifiedToken<User>): void {
    this.#entries.delete(token)
    this.#entries.set(token, entry)
    // Oldest first out: Map keeps insertion order.
    if (this.#entries.size > this.#max) this.#entries.delete(this.#entries.keys().next().value!)
  }

  delete (token: string): void {
    this.#entries.delete(token)
  }
}
