import { sql } from 'drizzle-orm'
import { isoTimestamp } from '../pages/spec.js'
import type { Message, Priority } from '../schemas/messages.js'

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

/** Every message with its author, as MESSAGE_COLUMNS reads them. */
export const MESSAGE_SOURCE = sql`(messages m JOIN users u ON u.id = m.author_id)`

/** Where a message is found: the `Location` of its 201. */
export const MESSAGES_PATH = '/v2/messages'
export const messageLocation = (id: number): string => `${MESSAGES_PATH}/${id}`

/**
 * A message's JSON written by SQL, byte for byte as MessageSchema's serializer writes it (same members,
 * same order; to_json escapes strings exactly as JSON.stringify does, and the priority's labels need
 * none, and to_json on them only cost time, docs/performance.md#delta-sync-pages). A stored 201 is
 * rendered by the statement that inserts the message, so the two are committed together. `p` holds
 * id, content, subject, priority, author_id, author_name and created_at (timestamptz).
 */
export function messageJsonSql (p: string) {
  const text = (expr: string) => `coalesce(to_json(${expr})::text, 'null')`
  return sql.raw(`'{"id":' || ${p}.id::text || ',"content":' || ${text(`${p}.content`)} || ',"subject":' || ${text(`${p}.subject`)}` +
    ` || ',"priority":"' || ${p}.priority::text || '","author":{"id":' || ${p}.author_id::text || ',"name":' || ${text(`${p}.author_name`)}` +
    ` || '},"createdAt":' || ${text(isoTimestamp(`${p}.created_at`))} || '}'`)
}
