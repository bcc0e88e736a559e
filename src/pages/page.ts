import type { Static } from '@sinclair/typebox'
import { InvalidCursorError, RetrieveFailedError } from '../errors.js'
import type { Revalidated } from '../http-cache/entity-tag.js'
import type { PaginationSchema } from '../schemas/pagination.js'
import { beside, encodeCursor } from './cursor.js'
import { filterDigest, parsePageRequest, type PageRequest, type PageResult } from './request.js'

// The answer of a collection read (CONTRACT 7 and 12): the rows a reader found, as `{ data, pagination }`
// with the cursors on either side.

export type Pagination = Static<typeof PaginationSchema>

export interface Page<T> {
  data: T[]
  pagination: Pagination
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
