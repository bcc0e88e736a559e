import { createPublicKey } from 'node:crypto'
import buildGetJwks from 'get-jwks'
import { Agent, request } from 'undici'

export interface KeyResolverOptions {
  /** The configured AUTH_ISSUER: the only place keys are ever fetched from. */
  issuer: string
  /** How long a fetched key is trusted before it is fetched again. */
  ttlMs?: number
  /** Minimum time between two fetches caused by a kid the resolver has never seen (CONTRACT 4). */
  unknownKidIntervalMs?: number
  timeoutMs?: number
}

export interface KeyResolver {
  /** The PEM public key for a token header, or an error. Never fetches from anywhere but the issuer. */
  (header: { alg?: unknown, kid?: unknown }): Promise<string>
}

export class KeyLookupError extends Error {
  override name = 'KeyLookupError'
}

interface Jwk { kid?: string, kty?: string, alg?: string, use?: string, [key: string]: unknown }

const isRsaSigningKey = (key: Jwk): boolean =>
  key.kty === 'RSA' && (key.alg === undefined || key.alg === 'RS256') && (key.use === undefined || key.use === 'sig')

/**
 * At most one key-set fetch per interval for kids never seen before. A fetch that found its key was a
 * first sight or a rotation, not a miss: it hands the window back, so a legitimate second kid is not
 * refused for the whole interval. Misses and failures keep the window.
 */
class FetchWindow {
  #last = Number.NEGATIVE_INFINITY

  constructor (private readonly intervalMs: number) {}

  take (): boolean {
    const now = Date.now()
    if (now - this.#last < this.intervalMs) return false
    this.#last = now
    return true
  }

  release (): void {
    this.#last = Number.NEGATIVE_INFINITY
  }
}

/** The RS256 signing keys of the issuer's key set, fetched directly (for a token without kid). */
async function fetchRsaKeys (domain: string, dispatcher: Agent, timeoutMs: number): Promise<Jwk[]> {
  const response = await request(`${domain}/.well-known/jwks.json`, {
    dispatcher,
    signal: AbortSignal.timeout(timeoutMs),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs
  })
  if (response.statusCode !== 200) {
    await response.body.dump()
    throw new KeyLookupError(`key set answered ${response.statusCode}`)
  }
  const body = await response.body.json() as { keys?: Jwk[] }
  return (body.keys ?? []).filter(isRsaSigningKey)
}

/**
 * Key lookup for RS256 tokens over get-jwks, pinned to the configured issuer. get-jwks alone refetches
 * the key set for every kid it has not cached, so kids never seen before share one fetch per interval;
 * kids that resolved once keep their normal refresh, so a flood of random kids cannot lock out real ones.
 */
export function createKeyResolver (options: KeyResolverOptions): KeyResolver {
  const domain = options.issuer
  const timeoutMs = options.timeoutMs ?? 5000
  const unknownKidIntervalMs = options.unknownKidIntervalMs ?? 30_000
  // fetch() has no timeout of its own; the dispatcher bounds every phase of the key-set request.
  // Redirects are errors: the key set is served by the issuer itself or not at all.
  const dispatcher = new Agent({ connectTimeout: timeoutMs, headersTimeout: timeoutMs, bodyTimeout: timeoutMs })
  const getJwks = buildGetJwks({
    ttl: options.ttlMs ?? 10 * 60_000,
    max: 100,
    fetchOptions: { redirect: 'error', dispatcher } as unknown as RequestInit
  })
  const knownKids = new Set<string>()
  const pems = new WeakMap<object, string>()
  const unknownFetches = new FetchWindow(unknownKidIntervalMs)
  let singleKey: { pem: string, expires: number } | undefined

  function toPem (jwk: object): string {
    let pem = pems.get(jwk)
    if (pem === undefined) {
      pem = createPublicKey({ key: jwk as import('node:crypto').JsonWebKey, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString()
      pems.set(jwk, pem)
    }
    return pem
  }

  // CONTRACT 10: a token without kid is accepted only when the key set holds exactly one RS256 key.
  async function keyWithoutKid (): Promise<string> {
    if (singleKey !== undefined && singleKey.expires > Date.now()) return singleKey.pem
    if (!unknownFetches.take()) throw new KeyLookupError('key set refetch throttled')
    const keys = await fetchRsaKeys(domain, dispatcher, timeoutMs)
    if (keys.length !== 1 || keys[0] === undefined) throw new KeyLookupError('token has no kid and the key set has several keys')
    const pem = toPem(keys[0])
    singleKey = { pem, expires: Date.now() + (options.ttlMs ?? 10 * 60_000) }
    unknownFetches.release()
    return pem
  }

  return async function resolveKey (header) {
    // Only RS256, decided before any network access (CONTRACT 4).
    if (header.alg !== 'RS256') throw new KeyLookupError('algorithm not allowed')
    if (header.kid === undefined) return keyWithoutKid()
    if (typeof header.kid !== 'string' || header.kid.length === 0 || header.kid.length > 256) throw new KeyLookupError('invalid kid')
    const kid = header.kid
    let fetching = false
    if (!knownKids.has(kid)) {
      const cached = getJwks.cache.get(getJwks.generateCacheKey('RS256', kid, `${domain}/`))
      if (cached === undefined) {
        if (!unknownFetches.take()) throw new KeyLookupError('unknown kid, refetch throttled')
        fetching = true
      }
    }
    let jwk
    try {
      jwk = await getJwks.getJwk({ domain, alg: 'RS256', kid })
    } catch (err) {
      // A kid that no longer resolves goes back under the unknown-kid limit.
      knownKids.delete(kid)
      throw err
    }
    if (!isRsaSigningKey(jwk)) throw new KeyLookupError('key is not an RS256 signing key')
    if (knownKids.size > 1000) knownKids.clear()
    knownKids.add(kid)
    const pem = toPem(jwk)
    if (fetching) {
      unknownFetches.release()
      // The key set holds another key than the one trusted for kid-less tokens: no longer exactly one (CONTRACT 10).
      if (singleKey !== undefined && singleKey.pem !== pem) singleKey = undefined
    }
    return pem
  }
}
