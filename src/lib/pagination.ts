import { Type, type TProperties, type TSchema } from '@sinclair/typebox'
import { asc, desc, type SQL } from 'drizzle-orm'
import type { PgColumn } from 'drizzle-orm/pg-core'
import { RetrieveFailedError } from '../errors.js'
import { Ref } from '../schemas/common.js'
import type { Revalidated } from './entity-tag.js'

// The collection convention of SPEC 4.9 and CONTRACT 7/10, implemented once. Each collection
// declares its sort allowlist and its filters; everything else here is shared.

export const DEFAULT_PAGE = 1
export const DEFAULT_LIMIT = 25
export const MAX_LIMIT = 100

export type SortOrder = 'asc' | 'desc'

export interface PageRequest<S extends string = string> {
  page: number
  limit: number
  offset: number
  sort: S
  order: SortOrder
}

export interface Page<T> {
  data: T[]
  pagination: { page: number, limit: number, total: number, totalPages: number }
}

// Pagination parameters stay strings in the schema: SPEC 4.9 says bad values fall back, never fail.
function paginationProperties (sortFields: readonly string[]) {
  return {
    page: Type.Optional(Type.String({ description: 'Page number, from 1. Invalid or below 1: 1.', examples: ['1'] })),
    limit: Type.Optional(Type.String({ description: `Page size, clamped into 1..${MAX_LIMIT}. Missing or invalid: ${DEFAULT_LIMIT}.`, examples: [String(DEFAULT_LIMIT)] })),
    sort: Type.Optional(Type.String({ description: `Sort field: one of ${sortFields.join(', ')}. Anything else: id.`, examples: ['id'] })),
    order: Type.Optional(Type.String({ description: 'desc for descending; any other value: asc.', examples: ['asc'] }))
  }
}

/** The querystring schema of a collection: the pagination parameters plus its own filters. */
export function collectionQuery<F extends TProperties> (sortFields: readonly string[], filters: F) {
  return Type.Object({ ...paginationProperties(sortFields), ...filters })
}

export const PaginationSchema = Type.Object({
  page: Type.Integer({ description: 'Effective page' }),
  limit: Type.Integer({ description: 'Effective page size' }),
  total: Type.Integer({ description: 'Items matching the filters' }),
  totalPages: Type.Integer({ description: 'ceil(total / limit); 0 when total is 0' })
}, { $id: 'Pagination', title: 'Pagination', examples: [{ page: 1, limit: 25, total: 120, totalPages: 5 }] })

/** The 200 body of a collection: only `data` and `pagination` at the top level (CONTRACT 7). */
export function pageSchema<T extends TSchema> (item: T) {
  return Type.Object({ data: Type.Array(item), pagination: Ref(PaginationSchema) })
}

// CONTRACT 10: Number(), truncated toward zero; not finite falls back to the default. An empty
// value is missing, not 0 (Number('') is 0): SPEC 4.9 gives `limit=` the default 25, not 1.
function toInteger (value: string | undefined, fallback: number): number {
  if (value === undefined || value.trim() === '') return fallback
  const n = Math.trunc(Number(value))
  return Number.isFinite(n) ? n : fallback
}

export function parsePageRequest<S extends string> (
  query: { page?: string, limit?: string, sort?: string, order?: string },
  sortFields: readonly S[]
): PageRequest<S> {
  const page = Math.max(DEFAULT_PAGE, toInteger(query.page, DEFAULT_PAGE))
  const limit = Math.min(MAX_LIMIT, Math.max(1, toInteger(query.limit, DEFAULT_LIMIT)))
  const sort = (sortFields as readonly string[]).includes(query.sort ?? '') ? query.sort as S : 'id' as S
  const order: SortOrder = query.order === 'desc' ? 'desc' : 'asc'
  // A huge page is an empty page, never an out-of-range OFFSET (CONTRACT 10).
  const offset = Math.min((page - 1) * limit, Number.MAX_SAFE_INTEGER)
  return { page, limit, offset, sort, order }
}

/** ORDER BY the requested column, ties broken by id ascending so pages never overlap (CONTRACT 7). */
export function orderBy (column: PgColumn | SQL, order: SortOrder, id: PgColumn): SQL[] {
  const primary = order === 'desc' ? desc(column) : asc(column)
  return column === id ? [primary] : [primary, asc(id)]
}

export function toPage<T> (data: T[], total: number, request: PageRequest): Page<T> {
  return {
    data,
    pagination: { page: request.page, limit: request.limit, total, totalPages: Math.ceil(total / request.limit) }
  }
}

// A result served again from a cache is the same object: for the same page request it gives the same Page
// object too, so what a route derives from a page (its serialized body) can be remembered with it.
const pagesOf = new WeakMap<object, Page<unknown>>()

/**
 * Reads one page of a collection: normalises the pagination parameters, runs the query (which may
 * find the client's copy current, CONTRACT 12), and turns any database failure into
 * `Failed to retrieve <collection>` (SPEC 4.9 rule 4).
 */
export async function readPage<S extends string, T> (
  collection: string,
  query: { page?: string, limit?: string, sort?: string, order?: string },
  sortFields: readonly S[],
  fetch: (page: PageRequest<S>) => Promise<Revalidated<{ rows: T[], total: number }>>
): Promise<Revalidated<Page<T>>> {
  const request = parsePageRequest(query, sortFields)
  let result: Revalidated<{ rows: T[], total: number }>
  try {
    result = await fetch(request)
  } catch (err) {
    throw new RetrieveFailedError(collection, { cause: err })
  }
  if (result.notModified) return result
  return { tag: result.tag, notModified: false, value: pageOf(result.value, request) }
}

function pageOf<T> (result: { rows: T[], total: number }, request: PageRequest): Page<T> {
  const known = pagesOf.get(result)
  if (known !== undefined && known.pagination.page === request.page && known.pagination.limit === request.limit) return known as Page<T>
  const page = toPage(result.rows, result.total, request)
  pagesOf.set(result, page)
  return page
}
