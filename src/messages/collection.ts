import { sql } from 'drizzle-orm'
import { MESSAGE_CHANGE_LOG } from '../db/change-log.js'
import type { Database } from '../db/client.js'
import type { Asker } from '../db/heavy-reads.js'
import { PRIORITY_VALUES } from '../db/schema.js'
import { createCollectionReader } from '../pages/reader.js'
import { toPage, type Page } from '../pages/page.js'
import type { PageRequest, PageResult } from '../pages/request.js'
import { hashKey, placeholder, plainKey, type CollectionSpec, type FilterValues } from '../pages/spec.js'
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
    priority: { condition: sql`m.priority = ${placeholder('priority')}::message_priority`, key: plainKey('priority') },
    // An author id no bigint column holds matches nothing, and never reaches the database as one.
    authorId: { condition: sql`m.author_id = ${placeholder('authorId')}::bigint`, key: plainKey('author_id'), matchesNothing: isBigintId },
    subject: { condition: sql`m.subject = ${placeholder('subject')}::text`, key: hashKey('subject') }
  },
  ranked: { dims: { id: 'id', createdAt: 'created' }, filter: 'priority' },
  // As the triggers key them: the filters' own keys (drizzle/0006), and one for messages without a subject (drizzle/0017).
  groupRanked: { priority: { key: "'priority=' || $v" }, subject: { key: "'subject=' || md5($v)", noneKey: 'subject:none' } },
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
