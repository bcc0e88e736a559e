import { createHash } from 'node:crypto'
import { NotFoundError } from '../errors.js'

// Conditional reads (CONTRACT 12). A read's tag is derived from what the service already knows before
// it reads anything: the versions of the tables the body shows (drizzle/0006: they grow with every row
// any client writes), the normalised request, and the caller where the body depends on the caller. So a
// matching If-None-Match is answered after one version read, with no page, row or count read at all.

/** What a read's body depends on beyond the table versions, and what the client already holds. */
export interface Conditional {
  /** Who the body is for, when it depends on the caller (private reads); '' for public reads. */
  scope: string
  /** The request's If-None-Match header, when it sent one. */
  ifNoneMatch: string | undefined
}

/** A read answered after revalidation: the current tag, and the value unless the client's copy is current. */
export type Revalidated<T> = { tag: string, notModified: false, value: T } | { tag: string, notModified: true }

/**
 * The weak tag of a body: `key` is the normalised request plus its scope. The same versions and key
 * always give the same tag, and any write another.
 */
export function entityTag (versions: string, key: string): string {
  const digest = createHash('sha1').update(versions).update('\0').update(key).digest('base64url')
  return `W/"${digest.slice(0, 22)}"`
}

/**
 * The tag of what a read of `key` answers at `versions` for `conditional`'s scope, and how the client's
 * If-None-Match meets it. Decided before the body is read, so a body is never older than its tag;
 * with 'any' (`*`), an item read answers 304 only when it has a current representation.
 */
export function tagFor (versions: string, key: string, conditional: Conditional): { tag: string, match: 'tag' | 'any' | false } {
  const tag = entityTag(versions, `${key}\0${conditional.scope}`)
  return { tag, match: ifNoneMatch(conditional.ifNoneMatch, tag) }
}

// An entity-tag of RFC 9110 8.8.3, optionally weak, in a comma-separated list.
const LISTED_TAG = /\s*(?:W\/)?("[\x21\x23-\x7e\x80-\xff]*")\s*(?:,|$)/gy

/**
 * RFC 9110 13.1.2: If-None-Match by weak comparison. 'tag' when a listed tag is the current one;
 * 'any' for `*`, which matches whenever a current representation exists; false otherwise. An
 * unparsable header matches nothing, so the full answer is sent.
 */
export function ifNoneMatch (header: string | undefined, tag: string): 'tag' | 'any' | false {
  if (header === undefined) return false
  if (header.trim() === '*') return 'any'
  const opaque = tag.startsWith('W/') ? tag.slice(2) : tag
  LISTED_TAG.lastIndex = 0
  let matched = false
  while (LISTED_TAG.lastIndex < header.length) {
    const start = LISTED_TAG.lastIndex
    const found = LISTED_TAG.exec(header)
    if (found === null || LISTED_TAG.lastIndex === start) return false
    if (found[1] === opaque) matched = true
  }
  return matched ? 'tag' : false
}

/** A conditional for a request: its If-None-Match (first value when repeated) and the body's scope. */
export function conditionalFor (headers: { 'if-none-match'?: string | string[] }, scope: string): Conditional {
  const given = headers['if-none-match']
  return { scope, ifNoneMatch: Array.isArray(given) ? given.join(',') : given }
}

/** An item read: a value that is null is the 404 of `what` ('Message', 'User'). */
export function found<T> (result: Revalidated<T | null>, what: string): Revalidated<T> {
  if (!result.notModified && result.value === null) throw new NotFoundError(what)
  return result as Revalidated<T>
}
