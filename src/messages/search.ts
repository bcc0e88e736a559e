import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { versionSql } from '../db/counters.js'
import { heavyRead, heavyReadWithMemory, unlessGone, type Asker } from '../db/heavy-reads.js'
import { statement } from '../db/statement.js'
import { SEARCH_IDS } from '../memory/budget.js'
import { toPage, type Page } from '../pages/page.js'
import type { PageRequest, PageResult } from '../pages/request.js'
import { placeholder, type FilterValues } from '../pages/spec.js'
import type { Message, MessageFilters, MessageSort } from '../schemas/messages.js'
import { likePattern, matchingRowsSql, matchMode, narrowedPattern, type MatchMode } from '../search/match.js'
import { idListsSql, matchColumns, orderedIds, type IdListRow } from '../search/id-lists.js'
import { cursorWindow, OrderedIdCache, type OrderedIds } from '../search/ordered-id-cache.js'
import { messageReader, type FilterName, type ReaderFilter } from './collection.js'
import { MESSAGE_COLUMNS, MESSAGE_SOURCE, toMessage, type MessageRow } from './row.js'

// Search: the ordered ids of a term's matches are read once, with the table's version, and kept;
// each page then reads only its own rows, together with the current version in the same snapshot.
// A differing version (any write by anyone) discards the ids and reads them afresh.
const searchFilterSql: Record<FilterName, ReturnType<typeof sql>> = {
  priority: sql`s.priority = ${placeholder('priority')}::message_priority`,
  authorId: sql`s.author_id = ${placeholder('authorId')}::bigint`,
  subject: sql`s.subject = ${placeholder('subject')}::text`
}

function searchIdsSql (sort: MessageSort, order: 'asc' | 'desc', present: FilterName[], mode: MatchMode) {
  const filters = sql.join(present.map((name) => sql` AND ${searchFilterSql[name]}`), sql``)
  const matching = matchingRowsSql('s', matchColumns(sort), filters, mode,
    { pattern: sql`${placeholder('pattern')}::text`, narrowed: sql`${placeholder('narrowed')}::text`, term: sql`${placeholder('term')}::text` })
  return idListsSql(sort, order, matching, versionSql('messages'))
}

const rowsByIds = statement<MessageRow & { version: number, ord: number | null, created_key: string }>('messages_by_ids', sql`
  SELECT v.version, r.* FROM (SELECT ${versionSql('messages')}::float8 AS version) v
  LEFT JOIN LATERAL (
    SELECT ${MESSAGE_COLUMNS}, (extract(epoch FROM m.created_at) * 1000000)::bigint::text AS created_key, p.ord FROM unnest(${placeholder('ids')}::bigint[]) WITH ORDINALITY AS p(id, ord)
    JOIN ${MESSAGE_SOURCE} ON m.id = p.id) r ON true
  ORDER BY r.ord`)

/**
 * What a term's read of its ids may hold: its bitmap of the table's pages exact up to some 900,000 pages
 * (10,000,000 messages take about 300,000), and the sort of its ids in memory.
 */
const SEARCH_WORK_MEM = '64MB'

const VERSION_AS_TOTAL = { name: 'version', sql: versionSql('messages') }

/** A search row's sort key as the collection reader renders it for cursors. */
function searchKey (row: MessageRow & { created_key: string }, sort: MessageSort): string | null {
  if (sort === 'id') return null
  return sort === 'createdAt' ? row.created_key : row[sort]
}

/**
 * A term's ids being read, for every request that waits for them: the read is given up (not started,
 * or its statement cancelled) once none waits any longer.
 */
interface SharedIds {
  ids: Promise<OrderedIds>
  waiting: number
  stop: AbortController
}

/** Searching messages: each term's ordered ids are read once and remembered while the table's version holds. */
export function createMessageSearch () {
  const searchCache = new OrderedIdCache(SEARCH_IDS)
  const searchStatements = new Map<string, ReturnType<typeof statement<IdListRow>>>()
  // One read of a term's ids at a time per key and database, however many requests want them.
  const computing = new Map<string, SharedIds>()

  /**
   * Starts the read of a term's ids, as a heavy read of the client whose request starts it (its share
   * of the places counts it), stopped by its own signal: aborted when the last request waiting for it
   * has gone.
   */
  function readIds (target: Database, key: string, term: string, present: FilterName[], filters: MessageFilters, page: PageRequest<MessageSort>, asker: Asker): SharedIds {
    const mode = matchMode(term)
    const shape = `${page.sort}:${page.order}:${present.join(',')}:${mode}`
    let run = searchStatements.get(shape)
    if (run === undefined) {
      run = statement<IdListRow>(`messages_search_${searchStatements.size}`, searchIdsSql(page.sort, page.order, present, mode))
      searchStatements.set(shape, run)
    }
    const params: Record<string, unknown> = { pattern: likePattern(term), narrowed: narrowedPattern(term), term }
    for (const name of present) params[name] = filters[name]
    const stop = new AbortController()
    const ids = heavyReadWithMemory(target, SEARCH_WORK_MEM, { address: asker.address, signal: stop.signal }, async (tx, signal) => await run(tx, params, signal))
      .then(async (rows) => ({ version: rows[0]?.version ?? 0, ids: await orderedIds(rows, page.sort, page.order) }))
    const shared: SharedIds = { ids, waiting: 0, stop }
    const forget = (): void => { if (computing.get(key) === shared) computing.delete(key) }
    ids.then(forget, forget)
    return shared
  }

  /** The term's ids, read or joined; a request whose client has gone stops waiting at once. */
  async function searchIds (target: Database, key: string, term: string, present: FilterName[], filters: MessageFilters, page: PageRequest<MessageSort>, asker: Asker): Promise<OrderedIds> {
    let shared = computing.get(key)
    if (shared === undefined) {
      shared = readIds(target, key, term, present, filters, page, asker)
      computing.set(key, shared)
    }
    const joined = shared
    joined.waiting++
    let left = false
    try {
      return await unlessGone(joined.ids, asker.signal, () => {
        left = true
        if (--joined.waiting > 0) return
        // Nobody waits any more: a request that comes now reads afresh rather than join a read given up.
        if (computing.get(key) === joined) computing.delete(key)
        joined.stop.abort()
      })
    } finally {
      if (!left) joined.waiting--
    }
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
    return { ...beside, rows: found.map(toMessage), keys: found.map((row) => searchKey(row, page.sort)), total: 0, version: rows[0]?.version }
  }

  // A search page by cursor in another sort than id: a seek with the match as one more filter, reading
  // the table's version in place of the total, which the remembered ids give. Those ids cannot be cut
  // at a position of such a sort: that needs every id's key, compared as the database orders them. No
  // index orders the match, so the seek walks the sort's index until it has a page: a heavy read.
  async function searchSeek (target: Database, term: string, filters: MessageFilters, page: PageRequest<MessageSort>, asker: Asker): Promise<PageResult<Message> & { version?: number }> {
    const { rows, total, ...rest } = await heavyRead(target, asker, async (_alone, signal) =>
      await messageReader.read(target, { ...filters, term: likePattern(term) } as FilterValues<ReaderFilter>, page, { address: asker.address, signal }, VERSION_AS_TOTAL))
    return { rows: rows.map(toMessage), ...rest, total: 0, version: total }
  }

  /** A page of the search for `term`, for `asker`, whose reads of ids and seeks are heavy reads. */
  async function searchPage (target: Database, term: string, filters: MessageFilters, page: PageRequest<MessageSort>, asker: Asker): Promise<Page<Message>> {
    return toPage(await searchResult(target, term, filters, page, asker), page)
  }

  async function searchResult (target: Database, term: string, filters: MessageFilters, page: PageRequest<MessageSort>, asker: Asker): Promise<PageResult<Message>> {
    // Without a term among the values, the term is never present.
    const present = messageReader.present(filters as FilterValues<FilterName>) as FilterName[] | null
    if (present === null) return { rows: [], keys: [], total: 0, before: false, after: false }
    const key = JSON.stringify([term, page.sort, page.order, present.map((name) => [name, filters[name]])])
    const ids = async (): Promise<OrderedIds> => {
      const read = await searchIds(target, key, term, present, filters, page, asker)
      searchCache.set(key, read)
      return read
    }
    // Ids read for this request are served as read even when a write came meanwhile: the page is what
    // the table held then, as any read racing a write may be. Reading them again would make a search
    // beside a stream of writes take several heavy reads in a row, each of which may wait for a place
    // and run up to the statement timeout: its answer would no longer come in time.
    const held = searchCache.get(key)
    if (page.cursor !== null && page.sort !== 'id') {
      // The seek does not need the ids, only their count: without any, both are read at once.
      const [{ version, ...result }, entry] = held === undefined
        ? await Promise.all([searchSeek(target, term, filters, page, asker), ids()])
        : [await searchSeek(target, term, filters, page, asker), held]
      return { ...result, total: (version === entry.version || held === undefined ? entry : await ids()).ids.length }
    }
    if (held !== undefined) {
      const { version, ...result } = await searchSlice(target, held, page)
      if (version === held.version) return { ...result, total: held.ids.length }
    }
    const entry = await ids()
    const { version: _version, ...result } = await searchSlice(target, entry, page)
    return { ...result, total: entry.ids.length }
  }

  return { page: searchPage }
}
