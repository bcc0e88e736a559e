import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { statement } from '../db/statement.js'
import { MESSAGE_COLUMNS, toMessage, type MessageRow } from './message-row.js'
import type { Message, NewMessage } from './messages.js'

// Concurrent creates are written together: while a few inserts are in flight, new ones queue and
// go as one multi-row INSERT, one statement, one commit, one WAL flush and one trigger run for the
// whole group. Each caller still gets its 201 only after the commit that holds its row.
const MAX_IN_FLIGHT = 2
const MAX_GROUP = 256

interface Pending {
  subjectId: string
  content: string
  subject: string | null
  priority: string
  resolve: (message: Message | null) => void
  reject: (err: unknown) => void
}

// The author is found by subject in the same statement: a create costs one round trip, and a caller
// without a local user yet simply gets no row back.
const insertGroup = statement<MessageRow & { subject_id: string }>('messages_insert', sql`
  WITH input AS (
    SELECT * FROM unnest(${sql.placeholder('subjectIds')}::text[], ${sql.placeholder('contents')}::text[],
      ${sql.placeholder('subjects')}::text[], ${sql.placeholder('priorities')}::text[]) WITH ORDINALITY
      AS i(subject_id, content, subject, priority, ord)),
  inserted AS (
    INSERT INTO messages (content, subject, priority, author_id)
    SELECT i.content, i.subject, i.priority::message_priority, u.id FROM input i JOIN users u ON u.subject_id = i.subject_id ORDER BY i.ord
    RETURNING id, content, subject, priority, author_id, created_at)
  SELECT ${MESSAGE_COLUMNS}, u.subject_id FROM inserted m JOIN users u ON u.id = m.author_id`)

const matchKey = (subjectId: string, content: string, subject: string | null, priority: string) =>
  JSON.stringify([subjectId, content, subject, priority])

export function createMessageWriter (db: Database) {
  let queue: Pending[] = []
  let inFlight = 0

  async function write (group: Pending[]): Promise<void> {
    const rows = await insertGroup(db, {
      subjectIds: group.map((p) => p.subjectId),
      contents: group.map((p) => p.content),
      subjects: group.map((p) => p.subject),
      priorities: group.map((p) => p.priority)
    })
    // Returned rows are matched to callers by value: equal requests are interchangeable.
    const byValue = new Map<string, Array<MessageRow & { subject_id: string }>>()
    for (const row of rows) {
      const key = matchKey(row.subject_id, row.content, row.subject, row.priority)
      const list = byValue.get(key)
      if (list === undefined) byValue.set(key, [row])
      else list.push(row)
    }
    for (const p of group) {
      const row = byValue.get(matchKey(p.subjectId, p.content, p.subject, p.priority))?.shift()
      p.resolve(row === undefined ? null : toMessage(row))
    }
  }

  function flush (): void {
    while (inFlight < MAX_IN_FLIGHT && queue.length > 0) {
      const group = queue.slice(0, MAX_GROUP)
      queue = queue.slice(group.length)
      inFlight++
      write(group)
        .catch(async (err: unknown) => {
          // One failing row must not fail its neighbours: retry each alone, each with its own outcome.
          if (group.length === 1) return group[0]!.reject(err)
          await Promise.all(group.map(async (p) => write([p]).catch(p.reject)))
        })
        .finally(() => {
          inFlight--
          flush()
        })
    }
  }

  return {
    create (subjectId: string, input: NewMessage): Promise<Message | null> {
      return new Promise((resolve, reject) => {
        queue.push({ subjectId, content: input.content, subject: input.subject ?? null, priority: input.priority ?? 'normal', resolve, reject })
        flush()
      })
    }
  }
}
