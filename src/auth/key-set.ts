import { createPublicKey } from 'node:crypto'
import { request, type Dispatcher } from 'undici'

// A hostile or broken provider cannot make the service hold more than this. Real key sets are a few
// keys of a few kilobytes each (certificate chains included), far below both bounds.
export const MAX_KEY_SET_BYTES = 256 * 1024
export const MAX_KEYS = 100

export class KeyLookupError extends Error {
  override name = 'KeyLookupError'
}

/** A key set as RS256 verification reads it. */
export interface KeySet {
  /** The SPKI PEM of each RS256 signing key, by kid. A kid that names two different keys names neither. */
  byKid: ReadonlyMap<string, string>
  /** The set's one RS256 signing key, with or without kid; undefined when it holds none or several (CONTRACT 10). */
  onlyKey: string | undefined
}

type Jwk = Record<string, unknown>

const isObject = (value: unknown): value is Jwk => typeof value === 'object' && value !== null && !Array.isArray(value)

// A public RSA key meant for RS256 signatures; a private member (d) means the provider published what it must not.
function isRs256SigningKey (jwk: Jwk): jwk is Jwk & { n: string, e: string } {
  const keyOps = jwk.key_ops
  return jwk.kty === 'RSA' && typeof jwk.n === 'string' && typeof jwk.e === 'string' && jwk.d === undefined &&
    (jwk.alg === undefined || jwk.alg === 'RS256') &&
    (jwk.use === undefined || jwk.use === 'sig') &&
    (keyOps === undefined || (Array.isArray(keyOps) && keyOps.includes('verify'))) &&
    (jwk.kid === undefined || typeof jwk.kid === 'string')
}

// RFC 7518 3.3: RS256 keys are 2048 bits or larger.
const MIN_MODULUS_BITS = 2048

/** The key's SPKI PEM, or undefined when its modulus and exponent are not an RSA key fit for RS256. */
function rs256Pem (jwk: Jwk): string | undefined {
  if (!isRs256SigningKey(jwk)) return undefined
  let key
  try {
    key = createPublicKey({ key: { kty: 'RSA', n: jwk.n, e: jwk.e }, format: 'jwk' })
  } catch {
    return undefined
  }
  // node:crypto takes any bytes as a modulus, even none.
  if ((key.asymmetricKeyDetails?.modulusLength ?? 0) < MIN_MODULUS_BITS) return undefined
  return key.export({ type: 'spki', format: 'pem' }).toString()
}

/**
 * A key set response body, read whole: every RS256 signing key in it, by kid. Keys of other types and
 * uses are left out; a body that is not a key set, or lists more than MAX_KEYS keys, is refused whole.
 */
export function parseKeySet (text: string): KeySet {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    throw new KeyLookupError('key set is not JSON')
  }
  if (!isObject(body) || !Array.isArray(body.keys) || !body.keys.every(isObject)) throw new KeyLookupError('not a key set')
  if (body.keys.length > MAX_KEYS) throw new KeyLookupError(`key set lists more than ${MAX_KEYS} keys`)
  const byKid = new Map<string, string>()
  // A kid given to two different keys: a token naming it cannot say which key signed it.
  const ambiguous = new Set<string>()
  const pems = new Set<string>()
  for (const jwk of body.keys as Jwk[]) {
    const pem = rs256Pem(jwk)
    if (pem === undefined) continue
    pems.add(pem)
    if (typeof jwk.kid !== 'string') continue
    const named = byKid.get(jwk.kid)
    if (named !== undefined && named !== pem) ambiguous.add(jwk.kid)
    byKid.set(jwk.kid, pem)
  }
  for (const kid of ambiguous) byKid.delete(kid)
  return { byKid, onlyKey: pems.size === 1 ? [...pems][0] : undefined }
}

/** The body as text, refused as soon as it passes `limit` bytes. */
async function readBounded (body: AsyncIterable<Buffer>, limit: number): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += chunk.length
    // Leaving the loop destroys the stream: the rest is never read.
    if (size > limit) throw new KeyLookupError(`key set is larger than ${limit} bytes`)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}

/**
 * One GET of the key set at `url`, bounded in time and size. Anything but a 200 is a failure, redirects
 * included (undici's request follows none): the key set is served by the issuer itself or not at all.
 */
export async function fetchKeySet (url: string, dispatcher: Dispatcher, timeoutMs: number): Promise<KeySet> {
  const response = await request(url, {
    dispatcher,
    headers: { accept: 'application/jwk-set+json, application/json' },
    signal: AbortSignal.timeout(timeoutMs),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs
  })
  if (response.statusCode !== 200) {
    await response.body.dump()
    throw new KeyLookupError(`key set answered ${response.statusCode}`)
  }
  return parseKeySet(await readBounded(response.body, MAX_KEY_SET_BYTES))
}
