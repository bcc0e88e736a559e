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

/** What is left to write of a value: a value, or the text between two values. */
type Pending = { value: unknown } | { text: string }

/**
 * The value as JSON with every object's members in key order: equal JSON values, equal text. Written
 * from a stack of what is left, not by recursion, so a body nested as deep as the body limit allows
 * (some 50,000 arrays) cannot overflow the call stack (JSON.stringify cannot take it either).
 */
export function canonicalJson (value: unknown): string {
  const parts: string[] = []
  const pending: Pending[] = [{ value }]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if ('text' in next) {
      parts.push(next.text)
      continue
    }
    const current = next.value
    if (Array.isArray(current)) {
      parts.push('[')
      pending.push({ text: ']' })
      // Pushed last first, so they come off the stack in order.
      for (let i = current.length - 1; i >= 0; i--) {
        pending.push({ value: current[i] })
        if (i > 0) pending.push({ text: ',' })
      }
    } else if (current !== null && typeof current === 'object') {
      const record = current as Record<string, unknown>
      const members = Object.keys(record).sort().filter((key) => record[key] !== undefined)
      parts.push('{')
      pending.push({ text: '}' })
      for (let i = members.length - 1; i >= 0; i--) {
        const key = members[i]!
        pending.push({ value: record[key] }, { text: `${JSON.stringify(key)}:` })
        if (i > 0) pending.push({ text: ',' })
      }
    } else {
      parts.push(JSON.stringify(current) ?? 'null')
    }
  }
  return parts.join('')
}

/**
 * Identifies a request body by its JSON value, so a retry matches whatever its key order and
 * whitespace: sha256 of the canonical JSON, in hex.
 */
export function requestFingerprint (body: unknown): string {
  return createHash('sha256').update(canonicalJson(body)).digest('hex')
}
