import { and, eq, ilike, or, type SQL } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { messages, rowCounts, users, type PRIORITY_VALUES } from '../db/schema.js'
import { orderBy, type PageRequest } from '../lib/pagination.js'
import { countRows } from './count.js'

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
  author: { id: number, name: string | null }
}

export const MESSAGE_SORT_FIELDS = ['id', 'createdAt', 'priority', 'subject'] as const
export type MessageSort = typeof MESSAGE_SORT_FIELDS[number]

const SORT_COLUMNS = {
  id: messages.id,
  createdAt: messages.createdAt,
  priority: messages.priority,
  subject: messages.subject
} satisfies Record<MessageSort, unknown>

const columns = {
  id: messages.id,
  content: messages.content,
  subject: messages.subject,
  priority: messages.priority,
  authorId: messages.authorId,
  authorName: users.name,
  createdAt: messages.createdAt
}

type Row = { id: number, content: string, subject: string | null, priority: Priority, authorId: number, authorName: string | null, createdAt: Date }

const toMessage = (row: Row): Message => ({
  id: row.id,
  content: row.content,
  subject: row.subject,
  priority: row.priority,
  author: { id: row.authorId, name: row.authorName },
  createdAt: row.createdAt.toISOString()
})

function filtersToWhere (filters: MessageFilters): SQL | undefined {
  return and(
    filters.priority === undefined ? undefined : eq(messages.priority, filters.priority),
    filters.authorId === undefined ? undefined : eq(messages.authorId, filters.authorId),
    filters.subject === undefined ? undefined : eq(messages.subject, filters.subject)
  )
}

// CONTRACT 10: %, _ and \ in a search term match themselves, not as LIKE wildcards.
export function likePattern (term: string): string {
  return `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
}

export function createMessagesRepository (db: Database) {
  // The trigger-maintained count makes the unfiltered total O(1); filtered totals count the matches.
  async function countMessages (where: SQL | undefined): Promise<number> {
    if (where !== undefined) return countRows(db, messages, where, 'messages_count')
    const [row] = await db.select({ n: rowCounts.rowCount }).from(rowCounts).where(eq(rowCounts.tableName, 'messages')).prepare('messages_total').execute()
    return row?.n ?? countRows(db, messages, undefined, 'messages_count_all')
  }

  async function findPage (where: SQL | undefined, page: PageRequest<MessageSort>): Promise<{ rows: Message[], total: number }> {
    const order = orderBy(SORT_COLUMNS[page.sort], page.order, messages.id)
    // Deferred join: the page's ids come from the index alone, so a deep OFFSET skips index entries
    // rather than joined rows; only the rows on the page are joined to their authors.
    const ids = db.select({ id: messages.id }).from(messages).where(where)
      .orderBy(...order).limit(page.limit).offset(page.offset).as('page_ids')
    const [rows, total] = await Promise.all([
      db.select(columns).from(ids)
        .innerJoin(messages, eq(messages.id, ids.id))
        .innerJoin(users, eq(users.id, messages.authorId))
        .orderBy(...order).prepare('messages_page').execute(),
      countMessages(where)
    ])
    return { rows: rows.map(toMessage), total }
  }

  return {
    list (filters: MessageFilters, page: PageRequest<MessageSort>) {
      return findPage(filtersToWhere(filters), page)
    },

    /** Case-insensitive substring match on content and subject, then the same filters as list. */
    search (term: string, filters: MessageFilters, page: PageRequest<MessageSort>) {
      const pattern = likePattern(term)
      return findPage(and(or(ilike(messages.content, pattern), ilike(messages.subject, pattern)), filtersToWhere(filters)), page)
    },

    async findById (id: number): Promise<Message | null> {
      const [row] = await db.select(columns).from(messages).innerJoin(users, eq(users.id, messages.authorId))
        .where(eq(messages.id, id))
      return row === undefined ? null : toMessage(row)
    },

    /** Inserts and returns the message; the author is passed in, so no second read is needed. */
    async create (input: NewMessage): Promise<Message> {
      const [row] = await db.insert(messages).values({
        content: input.content,
        subject: input.subject ?? null,
        priority: input.priority ?? 'normal',
        authorId: input.author.id
      }).returning()
      if (row === undefined) throw new Error('insert returned no row')
      return toMessage({ ...row, authorName: input.author.name })
    },

    /** Deletes and reports whether a row was there. */
    async delete (id: number): Promise<boolean> {
      const rows = await db.delete(messages).where(eq(messages.id, id)).returning({ id: messages.id })
      return rows.length > 0
    }
  }
}

export type MessagesRepository = ReturnType<typeof createMessagesRepository>
