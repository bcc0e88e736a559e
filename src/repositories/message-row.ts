import { sql } from 'drizzle-orm'
import { isoTimestamp } from './collection.js'
import type { Message, Priority } from './messages.js'

// A message as every statement of the messages repository selects it (aliases `m` for the message
// and `u` for its author) and as the API returns it. Its own module, so the writer can share it
// without an import cycle.

/** An item as the SQL returns it: bigint ids as float8, the time already in ISO-8601. */
export interface MessageRow {
  id: number
  content: string
  subject: string | null
  priority: Priority
  author_id: number
  author_name: string | null
  created_at: string
}

export const toMessage = (row: MessageRow): Message => ({
  id: row.id,
  content: row.content,
  subject: row.subject,
  priority: row.priority,
  author: { id: row.author_id, name: row.author_name },
  createdAt: row.created_at
})

export const MESSAGE_COLUMNS = sql`m.id::float8 AS id, m.content, m.subject, m.priority::text AS priority,
  m.author_id::float8 AS author_id, u.name AS author_name,
  ${sql.raw(isoTimestamp('m.created_at'))} AS created_at`
