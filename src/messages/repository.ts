import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import type { ReadRouter } from '../db/read-router.js'
import { statement } from '../db/statement.js'
import type { Conditional, Revalidated } from '../http-cache/entity-tag.js'
import { VersionedCache } from '../http-cache/version-cache.js'
import { MESSAGE_ITEM_BYTES, MESSAGE_PAGE_BYTES, messageBytes, pageBytes } from '../memory/budget.js'
import type { PageRequest, PageResult } from '../pages/request.js'
import { placeholder } from '../pages/spec.js'
import type { Message, MessageFilters, MessageSort, NewMessage } from '../schemas/messages.js'
import { readMessagePage } from './collection.js'
import { deleteAs } from './delete.js'
import { MESSAGE_COLUMNS, MESSAGE_SOURCE, toMessage, type MessageRow } from './row.js'
import { createMessageSearch } from './search.js'
import { createMessageWriter } from './writer.js'
import { type IdempotentWrite, type KeyedOutcome } from '../idempotency/write.js'

// The messages repository: every read and write of messages the routes make, each through the page
// and item caches that a write by anyone retires (src/http-cache/version-cache.ts).

const byId = statement<MessageRow>('messages_by_id', sql`SELECT ${MESSAGE_COLUMNS} FROM ${MESSAGE_SOURCE} WHERE m.id = ${placeholder('id')}::bigint`)

// Pages of the list and of search, remembered until any write to messages or users (authors' names);
// bounds and sizes in src/memory/budget.ts.
const pageSize = (page: PageResult<Message>) => pageBytes(page, messageBytes)
// The normalised request: it keys the cache and, with the versions, the page's tag (CONTRACT 12).
const pageKey = (kind: string, filters: MessageFilters, page: PageRequest<MessageSort>, term = '') =>
  JSON.stringify([kind, term, filters.priority, filters.authorId, filters.subject, page.sort, page.order, page.page, page.offset, page.limit, page.cursor, page.filters])

// Single messages, remembered like pages: a message shows its author's name, so users' writes retire it too.
const itemSize = (message: Message | null) => message === null ? 64 : messageBytes(message)
const exists = (message: Message | null) => message !== null

export interface MessagesRepositoryOptions {
  /** IDEMPOTENCY_TTL_HOURS (default 24). */
  idempotencyTtlHours?: number
}

export function createMessagesRepository (db: Database, read: ReadRouter = async (run) => run(db), options: MessagesRepositoryOptions = {}) {
  const writer = createMessageWriter(db, { idempotencyTtlHours: options.idempotencyTtlHours ?? 24 })
  const search = createMessageSearch()
  const pages = new VersionedCache<PageResult<Message>>(['messages', 'users'], MESSAGE_PAGE_BYTES, pageSize)
  const items = new VersionedCache<Message | null>(['messages', 'users'], MESSAGE_ITEM_BYTES, itemSize)

  async function findOn (target: Database, id: number): Promise<Message | null> {
    const [row] = await byId(target, { id })
    return row === undefined ? null : toMessage(row)
  }

  return {
    list (filters: MessageFilters, page: PageRequest<MessageSort>, conditional: Conditional): Promise<Revalidated<PageResult<Message>>> {
      return read((target) => pages.revalidate(target, pageKey('list', filters, page), conditional, () => readMessagePage(target, filters, page)))
    },

    /** Case-insensitive substring match on content and subject, then the same filters as list. */
    search (term: string, filters: MessageFilters, page: PageRequest<MessageSort>, conditional: Conditional): Promise<Revalidated<PageResult<Message>>> {
      return read((target) => pages.revalidate(target, pageKey('search', filters, page, term), conditional, () => search.page(target, term, filters, page)))
    },

    /** One message, or null; unread when the client's copy is current. */
    getById (id: number, conditional: Conditional): Promise<Revalidated<Message | null>> {
      return read((target) => items.revalidate(target, String(id), conditional, async () => findOn(target, id), exists))
    },

    /** Inserts as the local user of `subjectId`; null when that user does not exist yet. */
    create (subjectId: string, input: NewMessage): Promise<Message | null> {
      return writer.create(subjectId, input)
    },

    /**
     * Inserts under an Idempotency-Key, storing the 201 in the same statement: the stored response,
     * 'taken' when a committed request already holds the key, null when the local user does not exist yet.
     */
    createKeyed (subjectId: string, input: NewMessage, idempotency: IdempotentWrite): Promise<KeyedOutcome> {
      return writer.createKeyed(subjectId, input, idempotency)
    },

    /** Deletes a message as the caller (see ./delete.ts); null when the caller has no local user yet. */
    deleteAs (id: number, caller: { sub: string, role: string }): Promise<'deleted' | null> {
      return deleteAs(db, id, caller)
    }
  }
}

export type MessagesRepository = ReturnType<typeof createMessagesRepository>
