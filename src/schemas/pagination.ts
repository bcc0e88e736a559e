import { Type, type TProperties, type TSchema } from '@sinclair/typebox'
import { DOCUMENTED_ENUM, DOCUMENTED_MAX_LENGTH, Ref } from './common.js'

// The query and body schemas every collection shares (SPEC 4.9, CONTRACT 7), and their bounds.

export const DEFAULT_PAGE = 1
export const DEFAULT_LIMIT = 25
export const MAX_LIMIT = 100

// Above any URL Node accepts (its 16 KiB header limit includes the request line): every cursor that
// arrives is read by decodeCursor, so a malformed one is always `Invalid cursor`, never a schema error.
const MAX_QUERY_TEXT = 16 * 1024
// The longest cursor the document promises: one that still fits a request, with the rest of its line
// and headers, under Node's 16 KiB (a longer one may meet 431 before any route). A message's, with a
// 200-character subject of escaped characters at most, is some 1,800.
export const MAX_CURSOR_LENGTH = 8 * 1024

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
      maxLength: MAX_QUERY_TEXT,
      [DOCUMENTED_MAX_LENGTH]: MAX_CURSOR_LENGTH,
      description: 'A cursor (pagination.nextCursor): answers the items that follow it. Overrides page. Valid only with the sort, order, filters and search term it was issued for.'
    })),
    before: Type.Optional(Type.String({
      maxLength: MAX_QUERY_TEXT,
      [DOCUMENTED_MAX_LENGTH]: MAX_CURSOR_LENGTH,
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
