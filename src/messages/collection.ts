import { sql } from 'drizzle-orm'
import { MESSAGE_CHANGE_LOG } from '../db/change-log.js'
import type { Database } from '../db/client.js'
import { countedTotalSql } from '../db/counters.js'
import { PRIORITY_VALUES } from '../db/schema.js'
import { statement } from '../db/statement.js'
import { locateSql } from '../pages/locate.js'
import { createCollectionReader } from '../pages/reader.js'
import { toPage, type Page } from '../pages/page.js'
import type { PageRequest, PageResult } from '../pages/request.js'
import { hashKey, placeholder, plainKey, type CollectionSpec, type FilterValues } from '../pages/spec.js'
import type { Message, MessageFilters, MessageSort } from '../schemas/messages.js'
import { termMatches } from '../search/match.js'
import { MESSAGE_COLUMNS, MESSAGE_SOURCE, toMessage, type MessageRow } from './row.js'

// The messages as a collection (src/pages/): their sorts, filters and counters, and the one page the
// shared reader does not read itself, sort=priority without a filter.

export type FilterName = keyof MessageFilters
// The search term as a filter: the seek of a search page by cursor.
export type ReaderFilter = FilterName | 'term'

const isBigintId = (value: string | number) => !Number.isSafeInteger(value) || Number(value) < 1

/** The messages as a collection: its sorts, filters and counters (src/pages/spec.ts). */
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
  // As drizzle/0017's triggers key them: the subject filter's own key, and one for messages without a subject.
  groupRanked: { subject: { key: "'subject=' || md5($v)", noneKey: 'subject:none' } },
  changes: MESSAGE_CHANGE_LOG
}

export const messageReader = createCollectionReader<MessageSort, ReaderFilter, MessageRow>(MESSAGE_COLLECTION)

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

/** A page of the list, with its cursors. */
export async function readMessagePage (target: Database, filters: MessageFilters, page: PageRequest<MessageSort>): Promise<Page<Message>> {
  return toPage(await readMessages(target, filters, page), page)
}

/** The rows of a page: sort=priority from the priorities' totals, any other from the shared reader. */
async function readMessages (target: Database, filters: MessageFilters, page: PageRequest<MessageSort>): Promise<PageResult<Message>> {
  if (page.sort === 'priority') {
    // With a priority filter, every row has the same priority: the order is by id alone.
    if (filters.priority !== undefined) page = { ...page, sort: 'id', order: 'asc' }
    else if (filters.authorId === undefined && filters.subject === undefined && page.cursor === null) {
      const found = await PRIORITY_PAGE[page.order](target, { offset: page.offset, limit: page.limit })
      const rows = found[0]?.ord == null ? [] : found
      return { rows: rows.map(toMessage), keys: rows.map((row) => row.cursor_key), total: found[0]?.total ?? 0 }
    }
  }
  const { rows, ...rest } = await messageReader.read(target, filters as FilterValues<ReaderFilter>, page)
  return { rows: rows.map(toMessage), ...rest }
}
