import buildGetJwks from 'get-jwks'
import { Agent } from 'undici'
import { fetchKeySet, KeyLookupError, MAX_KEYS, type KeySet } from './key-set.js'

export { KeyLookupError }

export interface KeyResolverOptions {
  /** The configured AUTH_ISSUER, without a trailing slash: the only place keys are ever fetched from. */
  issuer: string
  /** JWKS_MAX_AGE_S in ms: how long a fetched key set is trusted; after a failed fetch, one more of it. */
  maxAgeMs?: number
  /** A kid the current set does not hold causes a fetch only this long after the last fetch of any kind began (CONTRACT 4: 30 s). */
  unknownKidIntervalMs?: number
  timeoutMs?: number
  /** The clock every timing rule reads (epoch ms). */
  now?: () => number
}

export interface KeyResolver {
  /** The PEM public key for a token header, or a KeyLookupError. Never fetches from anywhere but the issuer. */
  (header: { alg?: unknown, kid?: unknown }): Promise<string>
  close: () => Promise<void>
}

// Failed fetches are spaced from 1 s, doubling, to 30 s: a provider back after a blip is asked again
// soon, one that stays down is not asked on every request.
const FIRST_RETRY_MS = 1000
const LAST_RETRY_MS = 30_000
const MAX_KID_LENGTH = 256

/**
 * The current set's keys by kid, in get-jwks' LRU under its cache-key scheme, written only whole: each
 * fetched set empties it and fills it again. get-jwks' getJwk is never called: it fetches the set for one
 * kid, keeps only that key, and answers from a staleCache that outlives the key's removal. That
 * staleCache, which the LRU feeds on every delete, is emptied with it.
 */
class KidStore {
  // A whole set always fits (MAX_KEYS). Trust is the resolver's to decide, by its clock: the LRU's own ttl never runs out.
  readonly #jwks = buildGetJwks({ max: MAX_KEYS, ttl: Number.MAX_SAFE_INTEGER })
  readonly #domain: string
  #kids: string[] = []

  constructor (issuer: string) {
    this.#domain = `${issuer}/`
  }

  replace (byKid: KeySet['byKid']): void {
    const { cache, staleCache } = this.#jwks
    for (const kid of this.#kids) cache.delete(this.#key(kid))
    for (const kid of this.#kids) staleCache.delete(this.#key(kid))
    for (const [kid, pem] of byKid) cache.set(this.#key(kid), { domain: this.#domain, alg: 'RS256', kid, pem })
    this.#kids = [...byKid.keys()]
  }

  pem (kid: string): string | undefined {
    const entry = this.#jwks.cache.get(this.#key(kid))
    return typeof entry?.pem === 'string' ? entry.pem : undefined
  }

  #key (kid: string): string {
    return this.#jwks.generateCacheKey('RS256', kid, this.#domain)
  }
}

/**
 * The issuer's key set, cached whole and replaced whole (CONTRACT 16), as jose's createRemoteJWKSet
 * keeps one, with a clock that can be driven and an outage rule. One fetch at a time, for one of two
 * reasons: the set is older than the max age, or a token names a kid it does not hold and the last
 * fetch began at least the interval ago (so a flood of random kids costs one fetch per interval, and
 * that fetch brings in any newly published key). After a failure, none before the retry delay. Once a
 * fetch has failed, the cached keys stay in use until twice the max age from their fetch, then none is.
 */
class CachedKeySet {
  readonly #store: KidStore
  readonly #url: string
  readonly #dispatcher: Agent
  readonly #timeoutMs: number
  readonly #maxAgeMs: number
  readonly #unknownKidIntervalMs: number
  readonly #now: () => number
  #onlyKey: string | undefined
  #fetchedAt = Number.NEGATIVE_INFINITY
  #attemptedAt = Number.NEGATIVE_INFINITY
  #failedAt = Number.NEGATIVE_INFINITY
  #failures = 0
  #failure: unknown
  #pending: Promise<void> | undefined

  constructor (options: KeyResolverOptions, dispatcher: Agent) {
    this.#store = new KidStore(options.issuer)
    this.#url = `${options.issuer}/.well-known/jwks.json`
    this.#dispatcher = dispatcher
    this.#timeoutMs = options.timeoutMs ?? 5000
    this.#maxAgeMs = options.maxAgeMs ?? 600_000
    this.#unknownKidIntervalMs = options.unknownKidIntervalMs ?? 30_000
    this.#now = options.now ?? Date.now
  }

  async resolve (header: { alg?: unknown, kid?: unknown }): Promise<string> {
    // Only RS256 and a sane kid, decided before any network access (CONTRACT 4).
    if (header.alg !== 'RS256') throw new KeyLookupError('algorithm not allowed')
    const { kid } = header
    if (kid === undefined) {
      await this.#ensureUsable()
      if (this.#onlyKey === undefined) throw new KeyLookupError('token has no kid and the key set does not hold exactly one key')
      return this.#onlyKey
    }
    if (typeof kid !== 'string' || kid.length === 0 || kid.length > MAX_KID_LENGTH) throw new KeyLookupError('invalid kid')
    await this.#ensureUsable()
    const cached = this.#store.pem(kid)
    if (cached !== undefined) return cached
    await this.#fetchForUnknownKid()
    const fetched = this.#usable(this.#now()) ? this.#store.pem(kid) : undefined
    if (fetched === undefined) throw new KeyLookupError('kid not in the key set')
    return fetched
  }

  #fresh (now: number): boolean {
    return now < this.#fetchedAt + this.#maxAgeMs
  }

  /** After a failed fetch, the keys of the last good one for one more max age. */
  #inGrace (now: number): boolean {
    return this.#failures > 0 && now < this.#fetchedAt + 2 * this.#maxAgeMs
  }

  #usable (now: number): boolean {
    return this.#fresh(now) || this.#inGrace(now)
  }

  #retryAt (): number {
    return this.#failures === 0 ? Number.NEGATIVE_INFINITY : this.#failedAt + Math.min(LAST_RETRY_MS, FIRST_RETRY_MS * 2 ** (this.#failures - 1))
  }

  /** Resolves once the set may be used, fetching it when it is due; throws when no set may be. */
  async #ensureUsable (): Promise<void> {
    const now = this.#now()
    if (this.#fresh(now)) return
    const fetching = this.#pending ?? (now >= this.#retryAt() ? this.#fetch() : undefined)
    // In the grace after a failure the cached keys answer while the retry runs: an outage makes no request wait.
    if (fetching !== undefined && !this.#inGrace(now)) await fetching
    if (!this.#usable(this.#now())) throw new KeyLookupError(`key set unavailable: ${this.#failure instanceof Error ? this.#failure.message : String(this.#failure)}`)
  }

  async #fetchForUnknownKid (): Promise<void> {
    const now = this.#now()
    if (this.#pending === undefined && (now - this.#attemptedAt < this.#unknownKidIntervalMs || now < this.#retryAt())) return
    await this.#fetch()
  }

  /** One fetch at a time: callers meanwhile share the one in flight. It never rejects; a failure is recorded. */
  #fetch (): Promise<void> {
    this.#pending ??= this.#load().finally(() => { this.#pending = undefined })
    return this.#pending
  }

  async #load (): Promise<void> {
    this.#attemptedAt = this.#now()
    try {
      const set = await fetchKeySet(this.#url, this.#dispatcher, this.#timeoutMs)
      // Replaced whole: a key the new set no longer holds is refused from here on.
      this.#store.replace(set.byKid)
      this.#onlyKey = set.onlyKey
      this.#fetchedAt = this.#now()
      this.#failures = 0
    } catch (err) {
      this.#failedAt = this.#now()
      this.#failures++
      this.#failure = err
    }
  }
}

/** Key lookup for RS256 tokens against the configured issuer's key set (CONTRACT 4 and 16). */
export function createKeyResolver (options: KeyResolverOptions): KeyResolver {
  const timeoutMs = options.timeoutMs ?? 5000
  // request() has no timeout of its own beyond the signal; the dispatcher bounds every phase.
  const dispatcher = new Agent({ connectTimeout: timeoutMs, headersTimeout: timeoutMs, bodyTimeout: timeoutMs })
  const keySet = new CachedKeySet({ ...options, timeoutMs }, dispatcher)
  return Object.assign(async (header: { alg?: unknown, kid?: unknown }) => await keySet.resolve(header), {
    close: async () => await dispatcher.close()
  })
}
