import { sql } from 'drizzle-orm'
import { MESSAGE_CHANGE_LOG } from '../db/change-log.js'
import { keyOf, MESSAGE_KEYS, prefixSql, valueSql } from '../db/triggers/counter-keys.js'
import { PRIORITY_VALUES } from '../db/schema.js'
import { createCollectionReader } from '../pages/reader.js'
import { placeholder, type CollectionSpec } from '../pages/spec.js'
import type { MessageFilters, MessageSort } from '../schemas/messages.js'
import { termMatches } from '../search/match.js'
import { MESSAGE_COLUMNS, MESSAGE_SOURCE, type MessageRow } from './row.js'

// The messages as a collection (src/pages/): their sorts, filters and counters, and the reader built on
// them. The repository (./repository.ts) and search (./search.ts) read pages through `messageReader`.

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
