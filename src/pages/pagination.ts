import { createHash } from 'node:crypto'
import { Type, type TProperties, type TSchema } from '@sinclair/typebox'
import { asc, desc, type SQL } from 'drizzle-orm'
import type { PgColumn } from 'drizzle-orm/pg-core'
import { InvalidCursorError, RetrieveFailedError } from '../errors.js'
import { DOCUMENTED_ENUM, Ref } from '../schemas/common.js'
import type { Revalidated } from '../http-cache/entity-tag.js'

// The collection convention of SPEC 4.9 and CONTRACT 7/10, implemented once. Each collection
// declares its sort allowlist and its filters; everything else here is shared.

export const DEFAULT_PAGE = 1
export const DEFAULT_LIMIT = 25
export const MAX_LIMIT = 100

export type SortOrder = 'asc' | 'desc'

// Above any URL Node accepts (its 16 KiB header limit includes the request line): every cursor that
// arrives is read by decodeCursor, so a malformed one is always `Invalid cursor`, never a schema error.
export const MAX_CURSOR_LENGTH = 16 * 1024

/**
 * A place in a collection's order (CONTRACT 12): the sort key as PostgreSQL renders it to text (null for
 * a NULL key, and for sort=id whose key is the id) and the id. Not necessarily an item's: positions
 * stay valid after their item is deleted.
 */
export interface Position {
  key: string | null
  id: number
}

/** `after`: the items that follow the position; `before`: the items that precede it. */
export interface Cursor extends Position {
  direction: 'after' | 'before'
}

export interface PageRequest<S extends string = string> {
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

export interface Pagination {
  page: number | null
  limit: number
  total: number
  totalPages: number
  nextCursor: string | null
  prevCursor: string | null
}

export interface Page<T> {
  data: T[]
  pagination: Pagination
}

/**
 * A number a generated client passes as a number, which any text also satisfies: SPEC 4.9 says a bad
 * page or limit falls back, never fails. The string comes first, so Ajv never coerces a value it
 * then refuses (an integer branch first turns "0" into 0, which the string branch no longer takes).
 */
export const LenientInteger = (integer: { minimum: number, maximum?: number, default: number }, description: string) =>
  Type.Union([Type.String(), Type.Integer(integer)], { description, examples: [integer.default] })

function paginationProperties (sortFields: readonly string[]) {
  return {
    page: Type.Optional(LenientInteger({ minimum: 1, default: DEFAULT_PAGE }, 'Page number, from 1. Invalid or below 1: 1.')),
    limit: Type.Optional(LenientInteger({ minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT },
      `Page size, clamped into 1..${MAX_LIMIT}. Missing or invalid: ${DEFAULT_LIMIT}.`)),
    sort: Type.Optional(Type.String({ description: 'Sort field. Anything else: id.', examples: ['id'], [DOCUMENTED_ENUM]: sortFields })),
    order: Type.Optional(Type.String({ description: 'desc for descending; any other value: asc.', examples: ['asc'], [DOCUMENTED_ENUM]: ['asc', 'desc'] })),
    after: Type.Optional(Type.String({
      maxLength: MAX_CURSOR_LENGTH,
      description: 'A cursor (pagination.nextCursor): answers the items that follow it. Overrides page. Valid only with the sort, order, filters and search term it was issued for.'
    })),
    before: Type.Optional(Type.String({
      maxLength: MAX_CURSOR_LENGTH,
      description: 'A cursor (pagination.prevCursor): answers the items that precede it, in the requested order. Overrides page; not together with after.'
    }))
  }
}

/** The querystring schema of a collection: the pagination parameters plus its own filters. */
export function collectionQuery<F extends TProperties> (sortFields: readonly string[], filters: F) {
  return Type.Object({ ...paginationProperties(sortFields), ...filters })
}

const CursorOrNull = (description: string) => Type.Union([Type.String(), Type.Null()], { description })

export const PaginationSchema = Type.Object({
  page: Type.Union([Type.Integer(), Type.Null()], { description: 'Effective page; null when the page was asked for by cursor' }),
  limit: Type.Integer({ description: 'Effective page size' }),
  total: Type.Integer({ description: 'Items matching the filters' }),
  totalPages: Type.Integer({ description: 'ceil(total / limit); 0 when total is 0' }),
  nextCursor: CursorOrNull('Pass as `after` for the items that follow this page; null when none follows'),
  prevCursor: CursorOrNull('Pass as `before` for the items that precede this page; null when none precedes')
}, {
  $id: 'Pagination',
  title: 'Pagination',
  examples: [{ page: 1, limit: 25, total: 120, totalPages: 5, nextCursor: 'eyJjIjoibWVzc2FnZXMiLCJzIjoiaWQiLCJvIjoiYXNjIiwiZiI6IiIsImsiOm51bGwsImkiOjI1fQ', prevCursor: null }]
})

/**
 * The 200 body of a collection, a shared schema named `name` (register it with addSchema): only `data`
 * and `pagination` at the top level (CONTRACT 7). `item` is the shared schema of one item.
 */
export function pageSchema<T extends TSchema> (item: T, name: string) {
  const example = { data: (item.examples as unknown[] | undefined)?.slice(0, 1) ?? [], pagination: { page: 1, limit: 25, total: 1, totalPages: 1, nextCursor: null, prevCursor: null } }
  return Type.Object({ data: Type.Array(Ref(item)), pagination: Ref(PaginationSchema) }, { $id: name, title: name, examples: [example] })
}

// CONTRACT 10: Number(), truncated toward zero; not finite falls back to the default. An empty
// value is missing, not 0 (Number('') is 0): SPEC 4.9 gives `limit=` the default 25, not 1.
function toInteger (value: string | number | undefined, fallback: number): number {
  if (value === undefined || (typeof value === 'string' && value.trim() === '')) return fallback
  const n = Math.trunc(Number(value))
  return Number.isFinite(n) ? n : fallback
}

/** SPEC 4.9's `limit`: clamped into 1..max; missing or not a number gives the default. */
export function clampLimit (value: string | number | undefined, fallback: number, max: number): number {
  return Math.min(max, Math.max(1, toInteger(value, fallback)))
}

const PAGINATION_KEYS = new Set(['page', 'limit', 'sort', 'order', 'after', 'before'])

/**
 * What a cursor is valid for besides its collection, sort and order: every other query parameter (the
 * filters, the search term) as validated, in a short digest. Pagination parameters are left out, so a
 * client may change `limit` between pages.
 */
function filterDigest (query: Record<string, unknown>): string {
  const entries = Object.entries(query)
    .filter(([name, value]) => !PAGINATION_KEYS.has(name) && value !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  if (entries.length === 0) return ''
  return createHash('sha256').update(JSON.stringify(entries)).digest('base64url').slice(0, 11)
}

interface CursorScope { collection: string, sort: string, order: SortOrder, filters: string }

// A cursor is opaque to clients: base64url of [collection, sort, order, filter digest, key, id].
export function encodeCursor (scope: CursorScope, position: Position): string {
  const fields = [scope.collection, scope.sort, scope.order, scope.filters, position.key, position.id]
  return Buffer.from(JSON.stringify(fields)).toString('base64url')
}

const BASE64URL = /^[A-Za-z0-9_-]+$/

function decodeCursor (text: string, scope: CursorScope): Position {
  let fields: unknown
  try {
    fields = BASE64URL.test(text) ? JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) : undefined
  } catch {
    fields = undefined
  }
  if (!Array.isArray(fields) || fields.length !== 6) throw new InvalidCursorError()
  const [collection, sort, order, filters, key, id] = fields as unknown[]
  if (collection !== scope.collection || sort !== scope.sort || order !== scope.order || filters !== scope.filters ||
    (key !== null && typeof key !== 'string') || typeof id !== 'number' || !Number.isSafeInteger(id)) {
    throw new InvalidCursorError()
  }
  return { key, id }
}

/**
 * The position right next to `position` on one side, in the order of (sort, order). Ids are integers,
 * so the items strictly before the position right after an item's are that item and those before it.
 */
export function beside (position: Position, sort: string, order: SortOrder, side: 'after' | 'before'): Position {
  // Ties (and sort=id itself when ascending) run by id ascending; sort=id descending runs the other way.
  const step = (side === 'after' ? 1 : -1) * (sort === 'id' && order === 'desc' ? -1 : 1)
  return { key: position.key, id: position.id + step }
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
  return { page, limit, offset, sort, order, cursor, filters }
}

/** ORDER BY the requested column, ties broken by id ascending so pages never overlap (CONTRACT 7). */
export function orderBy (column: PgColumn | SQL, order: SortOrder, id: PgColumn): SQL[] {
  const primary = order === 'desc' ? desc(column) : asc(column)
  return column === id ? [primary] : [primary, asc(id)]
}

/**
 * The page a read answers, with its cursors. By page number, items precede a non-empty page past the
 * first and follow one that ends before the total; an empty page has no item to anchor a cursor. By
 * cursor, the read said; an empty page anchors the way back at the cursor itself.
 */
export function toPage<T extends { id: number }> (result: PageResult<T>, request: PageRequest, collection: string, filters: string): Page<T> {
  const { rows, keys, total } = result
  const { cursor, sort, order } = request
  const scope = { collection, sort, order, filters }
  const count = rows.length
  const first = count > 0 ? { key: keys[0] ?? null, id: rows[0]!.id } : cursor === null ? null : beside(cursor, sort, order, 'after')
  const last = count > 0 ? { key: keys[count - 1] ?? null, id: rows[count - 1]!.id } : cursor === null ? null : beside(cursor, sort, order, 'before')
  const before = cursor === null ? request.offset > 0 && count > 0 : result.before === true
  const after = cursor === null ? request.offset + count < total : result.after === true
  return {
    data: rows,
    pagination: {
      page: cursor === null ? request.page : null,
      limit: request.limit,
      total,
      totalPages: Math.ceil(total / request.limit),
      nextCursor: after && last !== null ? encodeCursor(scope, last) : null,
      prevCursor: before && first !== null ? encodeCursor(scope, first) : null
    }
  }
}

// A result served again from a cache is the same object: for the same page request it gives the same Page
// object too, so what a route derives from a page (its serialized body) can be remembered with it.
const pagesOf = new WeakMap<object, { request: string, page: Page<unknown> }>()

/**
 * Reads one page of a collection: normalises the pagination parameters, runs the query (which may
 * find the client's copy current, CONTRACT 12), and turns any database failure into
 * `Failed to retrieve <collection>` (SPEC 4.9 rule 4). An invalid cursor is a 400 before anything is read.
 */
export async function readPage<S extends string, T extends { id: number }> (
  collection: string,
  query: { page?: string | number, limit?: string | number, sort?: string, order?: string, after?: string, before?: string },
  sortFields: readonly S[],
  fetch: (page: PageRequest<S>) => Promise<Revalidated<PageResult<T>>>
): Promise<Revalidated<Page<T>>> {
  const filters = filterDigest(query)
  const request = parsePageRequest(query, sortFields, collection, filters)
  let result: Revalidated<PageResult<T>>
  try {
    result = await fetch(request)
  } catch (err) {
    if (err instanceof InvalidCursorError) throw err
    throw new RetrieveFailedError(collection, { cause: err })
  }
  if (result.notModified) return result
  return { tag: result.tag, notModified: false, value: pageOf(result.value, request, collection, filters) }
}

function pageOf<T extends { id: number }> (result: PageResult<T>, request: PageRequest, collection: string, filters: string): Page<T> {
  // Cursors name the filters, so a page is shared only by requests with the same ones.
  const asked = JSON.stringify([request.page, request.limit, request.cursor, filters])
  const known = pagesOf.get(result)
  if (known !== undefined && known.request === asked) return known.page as Page<T>
  const page = toPage(result, request, collection, filters)
  pagesOf.set(result, { request: asked, page })
  return page
}
