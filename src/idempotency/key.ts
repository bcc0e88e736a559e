import { createHash } from 'node:crypto'
import { InvalidIdempotencyKeyError } from '../errors.js'

// CONTRACT 12 (after draft-ietf-httpapi-idempotency-key-header): 1 to 255 visible ASCII characters;
// the quoted form (a structured-field string) stands for the key inside the quotes. A value that
// begins or ends with a quote but is not a whole quoted key is refused rather than guessed at.
const KEY = /^[\x21-\x7e]{1,255}$/
const QUOTED = /^"([\x21\x23-\x7e]{1,255})"$/

/** The key of an `Idempotency-Key` header; undefined without one. Throws a 400 for any other value. */
export function parseIdempotencyKey (header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined
  if (typeof header !== 'string') throw new InvalidIdempotencyKeyError()
  if (header.startsWith('"') || header.endsWith('"')) {
    const quoted = QUOTED.exec(header)
    if (quoted === null) throw new InvalidIdempotencyKeyError()
    return quoted[1]
  }
  if (!KEY.test(header)) throw new InvalidIdempotencyKeyError()
  return header
}

/** The value as JSON with every object's members in key order: equal JSON values, equal text. */
export function canonicalJson (value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>
    const members = Object.keys(record).sort().filter((key) => record[key] !== undefined)
    return `{${members.map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/**
 * Identifies a request body by its JSON value, so a retry matches whatever its key order and
 * whitespace: sha256 of the canonical JSON, in hex.
 */
export function requestFingerprint (body: unknown): string {
  return createHash('sha256').update(canonicalJson(body)).digest('hex')
}
