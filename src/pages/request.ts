import { createHash } from 'node:crypto'
import { InvalidCursorError } from '../errors.js'
import { DEFAULT_LIMIT, DEFAULT_PAGE, MAX_LIMIT } from '../schemas/pagination.js'
import { decodeCursor, type Cursor, type SortOrder } from './cursor.js'

// The collection convention of SPEC 4.9 and CONTRACT 7/10, implemented once: what a page request is,
// and how the query parameters of any collection become one. Each collection declares its sort
// allowlist and its filters; everything else is shared.

export interface PageRequest<S extends string = string> {
  /** The collection its cursors belong to ('messages', 'users', 'movies'). */
  collection: string
  page: number
  limit: number
  offset: number
  sort: S
  order: SortOrder
  /** Set when the request came with `after` or `before`: `page` and `offset` are then ignored. */
  cursor: Cursor | null
  /** Digest of the other query parameters, which the page's cursors are bound to ('' without any). */
  filters: string
}

/**
 * What a collection read answers: the rows, the exact total, and the sort key of each row (for its
 * cursor). A read by cursor also tells whether any item precedes and follows the page, checked in the
 * same snapshot; a read by page number leaves that to the total.
 */
export interface PageResult<T> {
  rows: T[]
  total: number
  keys: Array<string | null>
  before?: boolean
  after?: boolean
}

// CONTRACT 10: Number(), truncated toward zero; not finite falls back to the default. An empty
// value is missing, not 0 (Number('') is 0): SPEC 4.9 gives `limit=` the default 25, not 1.
function toInteger (value: string | number | undefined, fallback: number): number {
  if (value === undefined || (typeof value === 'string' && value.trim() === '')) return fallback
  const n = Math.trunc(Number(value))
  return Number.isFinite(n) ? n : fallback
}

/** A lenient integer parameter: clamped into min..max; missing or not a number gives the default. */
export function clampInteger (value: string | number | undefined, fallback: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, toInteger(value, fallback)))
}

/** SPEC 4.9's `limit`: clamped into 1..max; missing or not a number gives the default. */
export function clampLimit (value: string | number | undefined, fallback: number, max: number): number {
  return clampInteger(value, fallback, 1, max)
}

const PAGINATION_KEYS = new Set(['page', 'limit', 'sort', 'order', 'after', 'before'])

/**
 * What a cursor is valid for besides its collection, sort and order: every other query parameter (the
 * filters, the search term) as validated, in a short digest. Pagination parameters are left out, so a
 * client may change `limit` between pages.
 */
export function filterDigest (query: Record<string, unknown>): string {
  const entries = Object.entries(query)
    .filter(([name, value]) => !PAGINATION_KEYS.has(name) && value !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  if (entries.length === 0) return ''
  return createHash('sha256').update(JSON.stringify(entries)).digest('base64url').slice(0, 11)
}

const given = (value: string | undefined): value is string => value !== undefined && value !== ''

export function parsePageRequest<S extends string> (
  query: { page?: string | number, limit?: string | number, sort?: string, order?: string, after?: string, before?: string },
  sortFields: readonly S[],
  collection = '',
  filters = filterDigest(query)
): PageRequest<S> {
  const page = Math.max(DEFAULT_PAGE, toInteger(query.page, DEFAULT_PAGE))
  const limit = clampLimit(query.limit, DEFAULT_LIMIT, MAX_LIMIT)
  const sort = (sortFields as readonly string[]).includes(query.sort ?? '') ? query.sort as S : 'id' as S
  const order: SortOrder = query.order === 'desc' ? 'desc' : 'asc'
  // A huge page is an empty page, never an out-of-range OFFSET (CONTRACT 10).
  const offset = Math.min((page - 1) * limit, Number.MAX_SAFE_INTEGER)
  let cursor: Cursor | null = null
  if (given(query.after) || given(query.before)) {
    if (given(query.after) && given(query.before)) throw new InvalidCursorError()
    const direction = given(query.after) ? 'after' : 'before'
    const scope = { collection, sort, order, filters }
    cursor = { direction, ...decodeCursor((direction === 'after' ? query.after : query.before)!, scope) }
  }
  return { collection, page, limit, offset, sort, order, cursor, filters }
}
