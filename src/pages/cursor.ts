import { InvalidCursorError } from '../errors.js'

// Cursors (CONTRACT 12): a position in a collection's order, bound to the collection, sort, order and
// filters it was issued for. Opaque to clients; a crafted one is always `Invalid cursor`.

export type SortOrder = 'asc' | 'desc'

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

export interface CursorScope { collection: string, sort: string, order: SortOrder, filters: string }

// A cursor is opaque to clients: base64url of [collection, sort, order, filter digest, key, id].
export function encodeCursor (scope: CursorScope, position: Position): string {
  const fields = [scope.collection, scope.sort, scope.order, scope.filters, position.key, position.id]
  return Buffer.from(JSON.stringify(fields)).toString('base64url')
}

const BASE64URL = /^[A-Za-z0-9_-]+$/

export function decodeCursor (text: string, scope: CursorScope): Position {
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
