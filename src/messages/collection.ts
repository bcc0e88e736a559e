import { sql } from 'drizzle-orm'
import { MESSAGE_CHANGE_LOG } from '../db/change-log.js'
import type { Database } from '../db/client.js'
import type { Asker } from '../db/heavy-reads.js'
import { keyOf, MESSAGE_KEYS, prefixSql, valueSql } from '../db/triggers/counter-keys.js'
import { PRIORITY_VALUES } from '../db/schema.js'
import { createCollectionReader } from '../pages/reader.js'
import { toPage, type Page } from '../pages/page.js'
import type { PageRequest, PageResult } from '../pages/request.js'
import { placeholder, type CollectionSpec, type FilterValues } from '../pages/spec.js'
import type { Message, MessageFilters, MessageSort } from '../schemas/messages.js'
import { termMatches } from '../search/match.js'
import { MESSAGE_COLUMNS, MESSAGE_SOURCE, toMessage, type MessageRow } from './row.js'

// The messages as a collection (src/pages/): their sorts, filters and counters, read by the shared reader.

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
  walkFilters: { subject: ['priority'] },
  filters: {
    // By cursor, one value per filter: the index scans the whole pattern, not the narrowed one.
    term: { condition: termMatches('m', sql`${placeholder('term')}::text`) },
    priority: { condition: sql`m.priority = ${placeholder('priority')}::message_priority`, key: keyOf(MESSAGE_KEYS.priority) },
    // An author id no bigint column holds matches nothing, and never reaches the database as one.
    authorId: { condition: sql`m.author_id = ${placeholder('authorId')}::bigint`, key: keyOf(MESSAGE_KEYS.authorId), matchesNothing: isBigintId },
    subject: { condition: sql`m.subject = ${placeholder('subject')}::text`, key: keyOf(MESSAGE_KEYS.subject) }
  },
  ranked: { dims: { id: 'id', createdAt: 'created' }, filter: 'priority' },
  // As the triggers key them (src/db/triggers/counter-keys.ts): the filters' own keys, and one for messages without a subject.
  groupRanked: {
    priority: { key: prefixSql(MESSAGE_KEYS.priority, valueSql(MESSAGE_KEYS.priority, '$v')) },
    subject: { key: prefixSql(MESSAGE_KEYS.subject, valueSql(MESSAGE_KEYS.subject, '$v')), noneKey: MESSAGE_KEYS.subject.none }
  },
  changes: MESSAGE_CHANGE_LOG
}

export const messageReader = createCollectionReader<MessageSort, ReaderFilter, MessageRow>(MESSAGE_COLLECTION)

/** A page of the list, with its cursors, for `asker`. */
export async function readMessagePage (target: Database, filters: MessageFilters, page: PageRequest<MessageSort>, asker: Asker): Promise<Page<Message>> {
  return toPage(await readMessages(target, filters, page, asker), page)
}

/** The rows of a page, from the shared reader. */
async function readMessages (target: Database, filters: MessageFilters, page: PageRequest<MessageSort>, asker: Asker): Promise<PageResult<Message>> {
  // With a priority filter, every row has the same priority: the order is by id alone.
  if (page.sort === 'priority' && filters.priority !== undefined) page = { ...page, sort: 'id', order: 'asc' }
  const { rows, ...rest } = await messageReader.read(target, filters as FilterValues<ReaderFilter>, page, asker)
  return { rows: rows.map(toMessage), ...rest }
}
