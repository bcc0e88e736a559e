// Cursors are opaque (CONTRACT 12): tests of page mode compare whether each is there, not its text.

export type CursorKind = 'cursor' | null

interface WithPagination { pagination?: { nextCursor?: string | null, prevCursor?: string | null } }

const kind = (cursor: string | null | undefined): CursorKind | undefined =>
  cursor === undefined ? undefined : cursor === null ? null : 'cursor'

/** The body with each cursor replaced by its kind: 'cursor' when there is one, else null. */
export function cursorKinds<B> (body: B): B {
  const page = body as WithPagination
  if (typeof page !== 'object' || page === null || typeof page.pagination !== 'object' || page.pagination === null) return body
  const { nextCursor, prevCursor } = page.pagination
  return { ...page, pagination: { ...page.pagination, nextCursor: kind(nextCursor), prevCursor: kind(prevCursor) } } as B
}

/**
 * The pagination of page `page` in page mode holding `count` items, cursors as kinds: a nextCursor
 * when items follow the page, a prevCursor when items precede a page that has items.
 */
export function pagination (page: number, limit: number, total: number, count: number) {
  const offset = (page - 1) * limit
  return {
    page,
    limit,
    total,
    totalPages: Math.ceil(total / limit),
    nextCursor: (count > 0 && offset + count < total ? 'cursor' : null) as CursorKind,
    prevCursor: (count > 0 && offset > 0 ? 'cursor' : null) as CursorKind
  }
}

/** A page-mode body with the cursors as kinds. */
export const pageBody = <T>(data: T[], page: number, limit: number, total: number) => ({ data, pagination: pagination(page, limit, total, data.length) })
