import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import type { ReadRouter } from '../db/read-router.js'
import { PRIORITY_VALUES } from '../db/schema.js'
import { statement } from '../db/statement.js'
import type { PageRequest, PageResult } from '../pages/pagination.js'
import { cursorWindow, OrderedIdCache, type OrderedIds } from '../search/ordered-id-cache.js'
import type { Conditional, Revalidated } from '../http-cache/entity-tag.js'
import { heavyRead } from '../db/heavy-reads.js'
import { MESSAGE_ITEM_BYTES, MESSAGE_PAGE_BYTES, SEARCH_IDS, messageBytes, pageBytes } from '../memory/budget.js'
import { VersionedCache } from '../http-cache/version-cache.js'
import { MESSAGE_CHANGE_LOG } from '../db/change-log.js'
import { countedTotalSql, createCollectionReader, hashKey, locateSql, placeholder, plainKey, versionSql, type CollectionSpec, type FilterValues } from '../pages/reader.js'
import { createMessageWriter, type IdempotentWrite, type KeyedOutcome } from './writer.js'
import { MESSAGE_COLUMNS, MESSAGE_SOURCE, toMessage, type MessageRow } from './row.js'
import { hasWordJoins, likePattern, matchingRowsSql, narrowedPattern, termMatches } from '../search/match.js'

export { likePattern }

export type Priority = typeof PRIORITY_VALUES[number]

export interface Message {
  id: number
  content: string
  subject: string | null
  priority: Priority
  author: { id: number, name: string | null }
  createdAt: string
}

export interface MessageFilters {
  priority?: Priority
  authorId?: number
  subject?: string
}

export interface NewMessage {
  content: string
  subject?: string | null
  priority?: Priority
}

export const MESSAGE_SORT_FIELDS = ['id', 'createdAt', 'priority', 'subject'] as const
export type MessageSort = typeof MESSAGE_SORT_FIELDS[number]
type FilterName = keyof MessageFilters
// The search term as a filter: the seek of a search page by cursor.
type ReaderFilter = FilterName | 'term'

const isBigintId = (value: string | number) => !Number.isSafeInteger(value) || Number(value) < 1

/** The messages as a collection: its sorts, filters and counters (src/pages/reader.ts). */
export const MESSAGE_COLLECTION: CollectionSpec<MessageSort, ReaderFilter> = {
  table: 'messages',
  from: MESSAGE_SOURCE,
  columns: MESSAGE_COLUMNS,
  sorts: { id: 'm.id', createdAt: 'm.created_at', priority: 'm.priority', subject: 'm.subject' },
  keys: { id: 'id', createdAt: 'timestamptz', priority: { enum: 'message_priority', values: PRIORITY_VALUES }, subject: 'text' },
  grouped: ['priority', 'subject'],
  filters: {
    // By cursor, one value per filter: the index scans the whole pattern, not the narrowed one.
    term: { condition: termMatches('m', sql`${placeholder('term')}::text`) },
    priority: { condition: sql`m.priority = ${placeholder('priority')}::message_priority`, key: plainKey('priority') },
    // An author id no bigint column holds matches nothing, and never reaches the database as one.
    authorId: { condition: sql`m.author_id = ${placeholder('authorId')}::bigint`, key: plainKey('author_id'), matchesNothing: isBigintId },
    subject: { condition: sql`m.subject = ${placeholder('subject')}::text`, key: hashKey('subject') }
  },
  ranked: { dims: { id: 'id', createdAt: 'created' }, filter: 'priority' },
  changes: MESSAGE_CHANGE_LOG
}

const reader = createCollectionReader<MessageSort, ReaderFilter, MessageRow>(MESSAGE_COLLECTION)

// sort=priority without a priority filter: the priorities' totals, in the requested order, tell which
// priority holds the offset; inside it the order is by id, located in that priority's buckets. The
// page may run on into the next priorities, read from their first ids.
const priorityPage = (desc: boolean) => statement<MessageRow & { total: number, ord: number | null, cursor_key: string }>(`messages_priority_${desc ? 'desc' : 'asc'}`, sql`
  WITH pri AS MATERIALIZED (
    SELECT p.v, p.ord, ${countedTotalSql('messages', sql`'priority=' || p.v`)} AS n,
      sum(${countedTotalSql('messages', sql`'priority=' || p.v`)}) OVER (ORDER BY p.ord ${sql.raw(desc ? 'DESC' : 'ASC')}) AS upto
    FROM unnest(enum_range(NULL::message_priority)) WITH ORDINALITY AS p(v, ord)),
  target AS MATERIALIZED (
    SELECT v, ord, (${placeholder('offset')}::bigint - (upto - n))::bigint AS rem FROM pri
    WHERE upto > ${placeholder('offset')}::bigint ORDER BY ord ${sql.raw(desc ? 'DESC' : 'ASC')} LIMIT 1),
  ${locateSql('messages', sql`(SELECT 'priority=' || v FROM target)`, 'id', sql`(SELECT rem FROM target)`, false)},
  page AS MATERIALIZED (
    SELECT x.id, row_number() OVER (ORDER BY x.ord ${sql.raw(desc ? 'DESC' : 'ASC')}, x.id) AS ord FROM (
      SELECT p.ord, s.id FROM pri p CROSS JOIN LATERAL (
        SELECT m.id FROM messages m
        WHERE m.priority = p.v AND m.id >= CASE WHEN p.ord = (SELECT ord FROM target) THEN (SELECT bucket FROM loc) << 8 ELSE -9223372036854775807 END
        ORDER BY m.id LIMIT ${placeholder('limit')}::bigint + (SELECT skip FROM loc)) s
      WHERE p.ord ${sql.raw(desc ? '<=' : '>=')} (SELECT ord FROM target)) x
    ORDER BY x.ord ${sql.raw(desc ? 'DESC' : 'ASC')}, x.id OFFSET (SELECT skip FROM loc) LIMIT ${placeholder('limit')}::bigint)
  SELECT t.total, r.* FROM (SELECT ${countedTotalSql('messages', sql`''`)}::float8 AS total) t
  LEFT JOIN LATERAL (SELECT ${MESSAGE_COLUMNS}, m.priority::text AS cursor_key, page.ord FROM page JOIN ${MESSAGE_SOURCE} ON m.id = page.id) r ON true
  ORDER BY r.ord`)
const PRIORITY_PAGE = { asc: priorityPage(false), desc: priorityPage(true) }

// Search: the ordered ids of a term's matches are read once, with the table's version, and kept;
// each page then reads only its own rows, together with the current version in the same snapshot.
// A differing version (any write by anyone) discards the ids and reads them afresh.
const SEARCH_SORTS: Record<MessageSort, string> = { id: 's.id', createdAt: 's.created_at', priority: 's.priority', subject: 's.subject' }
const searchFilterSql: Record<FilterName, ReturnType<typeof sql>> = {
  priority: sql`s.priority = ${placeholder('priority')}::message_priority`,
  authorId: sql`s.author_id = ${placeholder('authorId')}::bigint`,
  subject: sql`s.subject = ${placeholder('subject')}::text`
}

function searchIdsSql (sort: MessageSort, order: 'asc' | 'desc', present: FilterName[], joined: boolean) {
  const by = sort === 'id' ? `s.id${order === 'desc' ? ' DESC' : ''}` : `${SEARCH_SORTS[sort]}${order === 'desc' ? ' DESC' : ''}, s.id`
  const columns = sql.raw(sort === 'id' ? 's.id' : `s.id, ${SEARCH_SORTS[sort]}`)
  const filters = sql.join(present.map((name) => sql` AND ${searchFilterSql[name]}`), sql``)
  const matching = matchingRowsSql('s', columns, filters, joined,
    { pattern: sql`${placeholder('pattern')}::text`, narrowed: sql`${placeholder('narrowed')}::text`, term: sql`${placeholder('term')}::text` })
  return sql`SELECT ${versionSql('messages')}::float8 AS version,
    coalesce((SELECT array_agg(s.id::float8 ORDER BY ${sql.raw(by)}) FROM (${matching}) s), '{}') AS ids`
}

const rowsByIds = statement<MessageRow & { version: number, ord: number | null, created_key: string }>('messages_by_ids', sql`
  SELECT v.version, r.* FROM (SELECT ${versionSql('messages')}::float8 AS version) v
  LEFT JOIN LATERAL (
    SELECT ${MESSAGE_COLUMNS}, (extract(epoch FROM m.created_at) * 1000000)::bigint::text AS created_key, p.ord FROM unnest(${placeholder('ids')}::bigint[]) WITH ORDINALITY AS p(id, ord)
    JOIN ${MESSAGE_SOURCE} ON m.id = p.id) r ON true
  ORDER BY r.ord`)

const VERSION_AS_TOTAL = { name: 'version', sql: versionSql('messages') }

const byId = statement<MessageRow>('messages_by_id', sql`SELECT ${MESSAGE_COLUMNS} FROM ${MESSAGE_SOURCE} WHERE m.id = ${placeholder('id')}::bigint`)

// CONTRACT 11: a delete's own check is part of the write, so it runs on the primary, and in the
// same statement as the delete: no replica lag and no concurrent delete between looking and deleting.
// FOR UPDATE makes a delete that lost a race to another see the row gone (404), not refused (403).
const deleteAsStatement = statement<{ found: boolean, deleted: boolean, known: boolean }>('messages_delete_as', sql`
  WITH me AS (SELECT id FROM users WHERE subject_id = ${placeholder('subjectId')}::text),
  target AS (SELECT id, author_id FROM messages WHERE id = ${placeholder('id')}::bigint FOR UPDATE),
  deleted AS (
    DELETE FROM messages m USING target t
    WHERE m.id = t.id AND (${placeholder('mayDeleteAny')}::boolean OR t.author_id = (SELECT id FROM me))
    RETURNING m.id)
  SELECT EXISTS (SELECT 1 FROM target) AS found, EXISTS (SELECT 1 FROM deleted) AS deleted, EXISTS (SELECT 1 FROM me) AS known`)

/**
 * What a delete did: `deleted`; `absent` (no such message); `forbidden` (the caller is not its
 * author); `unknown-caller` (not allowed, and the subject has no local user yet).
 */
export type DeleteOutcome = 'deleted' | 'absent' | 'forbidden' | 'unknown-caller'

// Pages of the list and of search, remembered until any write to messages or users (authors' names);
// bounds and sizes in src/memory/budget.ts.
const pageSize = (page: PageResult<Message>) => pageBytes(page, messageBytes)
// The normalised request: it keys the cache and, with the versions, the page's tag (CONTRACT 12).
const pageKey = (kind: string, filters: MessageFilters, page: PageRequest<MessageSort>, term = '') =>
  JSON.stringify([kind, term, filters.priority, filters.authorId, filters.subject, page.sort, page.order, page.page, page.offset, page.limit, page.cursor, page.filters])

// Single messages, remembered like pages: a message shows its author's name, so users' writes retire it too.
const itemSize = (message: Message | null) => message === null ? 64 : messageBytes(message)
const exists = (message: Message | null) => message !== null

/** A search row's sort key as the collection reader renders it for cursors. */
function searchKey (row: MessageRow & { created_key: string }, sort: MessageSort): string | null {
  if (sort === 'id') return null
  return sort === 'createdAt' ? row.created_key : row[sort]
}

const strip = (rows: Array<MessageRow & { ord?: number | null, total?: number, version?: number }>): Message[] =>
  rows.map(toMessage)

export interface MessagesRepositoryOptions {
  /** IDEMPOTENCY_TTL_HOURS (default 24). */
  idempotencyTtlHours?: number
}

export function createMessagesRepository (db: Database, read: ReadRouter = async (run) => run(db), options: MessagesRepositoryOptions = {}) {
  const writer = createMessageWriter(db, { idempotencyTtlHours: options.idempotencyTtlHours ?? 24 })
  const searchCache = new OrderedIdCache(SEARCH_IDS)
  const pages = new VersionedCache<PageResult<Message>>(['messages', 'users'], MESSAGE_PAGE_BYTES, pageSize)
  const items = new VersionedCache<Message | null>(['messages', 'users'], MESSAGE_ITEM_BYTES, itemSize)
  const searchStatements = new Map<string, ReturnType<typeof statement<{ version: number, ids: number[] }>>>()
  // One read of a term's ids at a time per key and database, however many requests want them.
  const computing = new Map<string, Promise<OrderedIds>>()

  function searchIds (target: Database, key: string, term: string, present: FilterName[], filters: MessageFilters, page: PageRequest<MessageSort>): Promise<OrderedIds> {
    const flightKey = key
    let pending = computing.get(flightKey)
    if (pending === undefined) {
      const joined = hasWordJoins(term)
      const shape = `${page.sort}:${page.order}:${present.join(',')}:${joined}`
      let run = searchStatements.get(shape)
      if (run === undefined) {
        run = statement<{ version: number, ids: number[] }>(`messages_search_${searchStatements.size}`, searchIdsSql(page.sort, page.order, present, joined))
        searchStatements.set(shape, run)
      }
      const params: Record<string, unknown> = { pattern: likePattern(term), narrowed: narrowedPattern(term), term }
      for (const name of present) params[name] = filters[name]
      pending = heavyRead(target, async () => await run(target, params)).then(([row]) => ({ version: row?.version ?? 0, ids: Float64Array.from(row?.ids ?? []) }))
      computing.set(flightKey, pending)
      const forget = () => computing.delete(flightKey)
      pending.then(forget, forget)
    }
    return pending
  }

  async function findOn (target: Database, id: number): Promise<Message | null> {
    const [row] = await byId(target, { id })
    return row === undefined ? null : toMessage(row)
  }

  async function listPage (target: Database, filters: MessageFilters, page: PageRequest<MessageSort>): Promise<PageResult<Message>> {
    if (page.sort === 'priority') {
      // With a priority filter, every row has the same priority: the order is by id alone.
      if (filters.priority !== undefined) page = { ...page, sort: 'id', order: 'asc' }
      else if (filters.authorId === undefined && filters.subject === undefined && page.cursor === null) {
        const found = await PRIORITY_PAGE[page.order](target, { offset: page.offset, limit: page.limit })
        const rows = found[0]?.ord == null ? [] : found
        return { rows: strip(rows), keys: rows.map((row) => row.cursor_key), total: found[0]?.total ?? 0 }
      }
    }
    const { rows, ...rest } = await reader.read(target, filters as FilterValues<ReaderFilter>, page)
    return { rows: rows.map(toMessage), ...rest }
  }

  /**
   * A search page from the remembered ids, with the version read beside its rows: by number, the ids at
   * its offset; by cursor with sort=id, the ids beyond the cursor's id, which places itself among them.
   */
  async function searchSlice (target: Database, entry: OrderedIds, page: PageRequest<MessageSort>): Promise<PageResult<Message> & { version?: number }> {
    const cursor = page.cursor
    const { from, to, ...beside } = cursor === null
      ? { from: Math.min(page.offset, entry.ids.length), to: Math.min(page.offset + page.limit, entry.ids.length) }
      : cursorWindow(entry.ids, cursor.id, page.order === 'desc', cursor.direction, page.limit)
    const rows = await rowsByIds(target, { ids: Array.from(entry.ids.subarray(from, to)) })
    const found = rows[0]?.ord == null ? [] : rows
    return { ...beside, rows: strip(found), keys: found.map((row) => searchKey(row, page.sort)), total: 0, version: rows[0]?.version }
  }

  // A search page by cursor in another sort than id: a seek with the match as one more filter, reading
  // the table's version in place of the total, which the remembered ids give. Those ids cannot be cut
  // at a position of such a sort: that needs every id's key, compared as the database orders them.
  async function searchSeek (target: Database, term: string, filters: MessageFilters, page: PageRequest<MessageSort>): Promise<PageResult<Message> & { version?: number }> {
    const { rows, total, ...rest } = await reader.read(target, { ...filters, term: likePattern(term) } as FilterValues<ReaderFilter>, page, VERSION_AS_TOTAL)
    return { rows: rows.map(toMessage), ...rest, total: 0, version: total }
  }

  async function searchPage (target: Database, term: string, filters: MessageFilters, page: PageRequest<MessageSort>): Promise<PageResult<Message>> {
    // Without a term among the values, the term is never present.
    const present = reader.present(filters as FilterValues<FilterName>) as FilterName[] | null
    if (present === null) return { rows: [], keys: [], total: 0, before: false, after: false }
    const key = JSON.stringify([term, page.sort, page.order, present.map((name) => [name, filters[name]])])
    let entry = searchCache.get(key)
    for (let attempt = 1; ; attempt++) {
      const fresh = entry === undefined
      if (entry === undefined) {
        entry = await searchIds(target, key, term, present, filters, page)
        searchCache.set(key, entry)
      }
      const { version, ...result } = page.cursor === null || page.sort === 'id' ? await searchSlice(target, entry, page) : await searchSeek(target, term, filters, page)
      // Under a stream of writes, ids read a moment ago are served as read: the page is what the
      // table held then, as any read racing a write may be.
      if (version === entry.version || (fresh && attempt >= 3)) return { ...result, total: entry.ids.length }
      searchCache.delete(key)
      entry = undefined
    }
  }

  return {
    list (filters: MessageFilters, page: PageRequest<MessageSort>, conditional: Conditional): Promise<Revalidated<PageResult<Message>>> {
      return read((target) => pages.revalidate(target, pageKey('list', filters, page), conditional, () => listPage(target, filters, page)))
    },

    /** Case-insensitive substring match on content and subject, then the same filters as list. */
    search (term: string, filters: MessageFilters, page: PageRequest<MessageSort>, conditional: Conditional): Promise<Revalidated<PageResult<Message>>> {
      return read((target) => pages.revalidate(target, pageKey('search', filters, page, term), conditional, () => searchPage(target, term, filters, page)))
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

    /** Deletes a message as `subjectId`, who may delete it when its author or when `mayDeleteAny`. */
    async deleteAs (id: number, caller: { subjectId: string, mayDeleteAny: boolean }): Promise<DeleteOutcome> {
      const [row] = await deleteAsStatement(db, { id, subjectId: caller.subjectId, mayDeleteAny: caller.mayDeleteAny })
      if (row === undefined || !row.found) return 'absent'
      if (row.deleted) return 'deleted'
      return row.known ? 'forbidden' : 'unknown-caller'
    }
  }
}

export type MessagesRepository = ReturnType<typeof createMessagesRepository>
