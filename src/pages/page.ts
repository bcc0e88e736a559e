import type { Static } from '@sinclair/typebox'
import type { PaginationSchema } from '../schemas/pagination.js'
import { beside, encodeCursor } from './cursor.js'
import { parsePageRequest, type PageRequest, type PageResult } from './request.js'

// The answer of a collection read (CONTRACT 7 and 12): the rows a reader found, as `{ data, pagination }`
// with the cursors on either side.

export type Pagination = Static<typeof PaginationSchema>

export interface Page<T> {
  data: T[]
  pagination: Pagination
}

/**
 * A collection's query as a page request (SPEC 4.9, CONTRACT 10): pagination parameters normalised,
 * the cursor decoded and bound to its collection, sort, order and the other parameters. An invalid
 * cursor is a 400 before anything is read.
 */
export function pageRequest<S extends string> (
  collection: string,
  query: { page?: string | number, limit?: string | number, sort?: string, order?: string, after?: string, before?: string },
  sortFields: readonly S[]
): PageRequest<S> {
  return parsePageRequest(query, sortFields, collection)
}

/**
 * The page a read answers, with its cursors. By page number, items precede a non-empty page past the
 * first and follow one that ends before the total; an empty page has no item to anchor a cursor. By
 * cursor, the read said; an empty page anchors the way back at the cursor itself.
 */
export function toPage<T extends { id: number }> (result: PageResult<T>, request: PageRequest): Page<T> {
  const { rows, keys, total } = result
  const { cursor, sort, order, collection, filters } = request
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
