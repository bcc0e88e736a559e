import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import type { Asker } from '../db/heavy-reads.js'
import type { ReadHandles } from '../db/read-router.js'
import { statement } from '../db/statement.js'
import { retrieveFailure } from '../errors.js'
import { found, tagFor, type Conditional, type Revalidated } from '../http-cache/entity-tag.js'
import { VersionedCache } from '../http-cache/version-cache.js'
import { MESSAGE_ITEM_BYTES, MESSAGE_PAGE_BYTES, messageBytes, pageBytes } from '../memory/budget.js'
import { pageRequest, toPage, type Page } from '../pages/page.js'
import type { PageRequest } from '../pages/request.js'
import { placeholder, type FilterValues } from '../pages/spec.js'
import { MESSAGE_SORT_FIELDS, type Message, type MessageFilters, type MessageListQuery, type MessageSearchQuery, type MessageSort, type NewMessage } from '../schemas/messages.js'
import { messageReader, type ReaderFilter } from './collection.js'
import { deleteAs } from './delete.js'
import { MESSAGE_COLUMNS, MESSAGE_SOURCE, messageLocation, toMessage, type MessageRow } from './row.js'
import { createMessageSearch } from './search.js'
import { createMessageWriter } from './writer.js'
import { parseIdempotencyKey, requestFingerprint } from '../idempotency/key.js'
import type { IdempotencyRepository, IdempotentRequest } from '../idempotency/repository.js'
import type { Caller } from '../users/local-user.js'

// The messages repository: every read and write of messages the routes make, each through the page
// and item caches that a write by anyone retires (src/http-cache/version-cache.ts).

const byId = statement<MessageRow>('messages_by_id', sql`SELECT ${MESSAGE_COLUMNS} FROM ${MESSAGE_SOURCE} WHERE m.id = ${placeholder('id')}::bigint`)

// Pages of the list and of search, remembered until any write to messages or users (authors' names);
// bounds and sizes in src/memory/budget.ts.
const pageSize = (page: Page<Message>) => pageBytes(page, messageBytes)
// The normalised request: it keys the cache and, with the versions, the page's tag (CONTRACT 12).
const pageKey = (kind: string, filters: MessageFilters, page: PageRequest<MessageSort>, term = '') =>
  JSON.stringify([kind, term, filters.priority, filters.authorId, filters.subject, page.sort, page.order, page.page, page.offset, page.limit, page.cursor, page.filters])

// Single messages, remembered like pages: a message shows its author's name, so users' writes retire it too.
const itemSize = (message: Message | null) => message === null ? 64 : messageBytes(message)

const failedRetrieving = retrieveFailure('messages')

/** A page of the list, with its cursors, for `asker`. */
async function readMessagePage (target: Database, filters: MessageFilters, page: PageRequest<MessageSort>, asker: Asker): Promise<Page<Message>> {
  // With a priority filter, every row has the same priority: the order is by id alone.
  const read = page.sort === 'priority' && filters.priority !== undefined ? { ...page, sort: 'id' as const, order: 'asc' as const } : page
  const { rows, ...rest } = await messageReader.read(target, filters as FilterValues<ReaderFilter>, read, asker)
  return toPage({ rows: rows.map(toMessage), ...rest }, page)
}

/** What POST /v2/messages answers (CONTRACT 12): the 201's status, Location and body, and whether it is a stored one sent again. */
export interface CreatedMessage {
  /** Only 201s are stored (CONTRACT 12), so a replay is one too. */
  status: 201
  location: string
  /** The message, for the route's 201 schema to serialize; a string is a stored 201's JSON, sent as it is. */
  body: Message | string
  replayed: boolean
}

/** What a create needs of the other capabilities; plugins/messages.ts wires them in. */
export interface MessagesRepositoryOptions {
  /** SPEC 5.5: the caller's local user, provisioned on first use (the users repository's `localUser`). */
  localUser: (caller: Caller) => Promise<unknown>
  /** The stored answers of Idempotency-Key (src/idempotency/repository.ts). */
  idempotency: IdempotencyRepository
  /** IDEMPOTENCY_TTL_HOURS (default 24). */
  idempotencyTtlHours?: number
}

/** A write as the caller right after provisioning found no local user either: a fault, never a third attempt. */
function known<T> (written: T | null): T {
  if (written === null) throw new Error('local user vanished right after it was provisioned')
  return written
}

export function createMessagesRepository (db: Database, reads: ReadHandles, options: MessagesRepositoryOptions) {
  const { localUser, idempotency } = options
  const writer = createMessageWriter(db, { idempotencyTtlHours: options.idempotencyTtlHours ?? 24 })
  const search = createMessageSearch()
  const pages = new VersionedCache<Page<Message>>(['messages', 'users'], MESSAGE_PAGE_BYTES)
  const items = new VersionedCache<Message | null>(['messages', 'users'], MESSAGE_ITEM_BYTES)

  // Each read below runs on one database: the versions first, so a body is never older than its tag,
  // then the remembered value or the read. When it fails on a replica, it runs again on the primary.

  async function listOn (target: Database, query: MessageListQuery, page: PageRequest<MessageSort>, conditional: Conditional, asker: Asker): Promise<Revalidated<Page<Message>>> {
    const key = pageKey('list', query, page)
    const versions = await pages.versions(target)
    const { tag, match } = tagFor(versions, key, conditional)
    if (match !== false) return { tag, notModified: true }
    let value = pages.get(key, versions)
    if (value === undefined) {
      value = await readMessagePage(target, query, page, asker)
      pages.set(key, versions, value, pageSize(value))
    }
    return { tag, notModified: false, value }
  }

  async function searchOn (target: Database, term: string, query: MessageSearchQuery, page: PageRequest<MessageSort>, conditional: Conditional, asker: Asker): Promise<Revalidated<Page<Message>>> {
    const key = pageKey('search', query, page, term)
    const versions = await pages.versions(target)
    const { tag, match } = tagFor(versions, key, conditional)
    if (match !== false) return { tag, notModified: true }
    let value = pages.get(key, versions)
    if (value === undefined) {
      value = await search.page(target, term, query, page, asker)
      pages.set(key, versions, value, pageSize(value))
    }
    return { tag, notModified: false, value }
  }

  async function itemOn (target: Database, id: number, conditional: Conditional): Promise<Revalidated<Message | null>> {
    const key = String(id)
    const versions = await items.versions(target)
    const { tag, match } = tagFor(versions, key, conditional)
    if (match === 'tag') return { tag, notModified: true }
    let value = items.get(key, versions)
    if (value === undefined) {
      const [row] = await byId(target, { id })
      value = row === undefined ? null : toMessage(row)
      items.set(key, versions, value, itemSize(value))
    }
    // `*` matches a message that exists, never one that does not.
    if (match === 'any' && value !== null) return { tag, notModified: true }
    return { tag, notModified: false, value }
  }

  return {
    /**
     * GET /v2/messages: the page the query asks for, or 304 when the client's copy is current (CONTRACT 7,
     * 12). A deep page the database must walk is a heavy read for `asker` (CONTRACT 16).
     */
    async listPage (query: MessageListQuery, conditional: Conditional, asker: Asker): Promise<Revalidated<Page<Message>>> {
      const page = pageRequest('messages', query, MESSAGE_SORT_FIELDS)
      try {
        const on = reads.pick()
        try {
          return await listOn(on.db, query, page, conditional, asker)
        } catch (err) {
          return await listOn(on.fallback(err), query, page, conditional, asker)
        }
      } catch (err) {
        return failedRetrieving(err)
      }
    },

    /**
     * GET /v2/messages/search: case-insensitive substring match on content and subject, then paged as the
     * list. Reading a term's matches is a heavy read for `asker` (CONTRACT 16).
     */
    async searchPage (term: string, query: MessageSearchQuery, conditional: Conditional, asker: Asker): Promise<Revalidated<Page<Message>>> {
      const page = pageRequest('messages', query, MESSAGE_SORT_FIELDS)
      try {
        const on = reads.pick()
        try {
          return await searchOn(on.db, term, query, page, conditional, asker)
        } catch (err) {
          return await searchOn(on.fallback(err), term, query, page, conditional, asker)
        }
      } catch (err) {
        return failedRetrieving(err)
      }
    },

    /** GET /v2/messages/{id}: the message, unread when the client's copy is current; 404 when there is none. */
    async getOne (id: number, conditional: Conditional): Promise<Revalidated<Message>> {
      const on = reads.pick()
      try {
        return found(await itemOn(on.db, id, conditional), 'Message')
      } catch (err) {
        return found(await itemOn(on.fallback(err), id, conditional), 'Message')
      }
    },

    /**
     * POST /v2/messages as the caller (SPEC 5.5: its local user is provisioned on first use), with an
     * optional Idempotency-Key header (CONTRACT 12). With a key, the first request creates and is
     * answered from the 201 stored with it; a later one with the same key is that 201 again, byte for
     * byte, replayed: 422 if its body is another JSON value, 409 while the first one runs here. A
     * malformed key is 400.
     */
    async create (caller: Caller, input: NewMessage, idempotencyKey?: string | string[]): Promise<CreatedMessage> {
      const key = parseIdempotencyKey(idempotencyKey)
      if (key === undefined) {
        // The author is found by subject in the insert: a subject seen for the first time has none yet.
        let message = await writer.create(caller.sub, input)
        if (message === null) {
          await localUser(caller)
          message = known(await writer.create(caller.sub, input))
        }
        return { status: 201, location: messageLocation(message.id), body: message, replayed: false }
      }
      // Keys belong to the caller: two callers may use the same key independently.
      const request: IdempotentRequest = { subjectId: caller.sub, key, fingerprint: requestFingerprint(input) }
      idempotency.begin(request)
      try {
        // The write is tried first: a first request, the common case, costs the one grouped statement.
        let outcome = await writer.createKeyed(caller.sub, input, request)
        if (outcome === null) {
          await localUser(caller)
          outcome = known(await writer.createKeyed(caller.sub, input, request))
        }
        const { status, location, body } = outcome === 'taken' ? await idempotency.replay(request) : outcome.created
        return { status: status as 201, location, body, replayed: outcome === 'taken' }
      } finally {
        idempotency.end(request)
      }
    },

    /** Deletes a message as the caller (see ./delete.ts), its local user provisioned on first use. */
    async deleteAs (id: number, caller: Caller): Promise<void> {
      if (await deleteAs(db, id, caller) === null) {
        await localUser(caller)
        known(await deleteAs(db, id, caller))
      }
    }
  }
}

export type MessagesRepository = ReturnType<typeof createMessagesRepository>
