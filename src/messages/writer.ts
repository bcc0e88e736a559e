import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { statement } from '../db/statement.js'
import { isoTimestamp } from '../pages/spec.js'
import { MESSAGES_PATH, messageJsonSql, toMessage, type MessageRow } from './row.js'
import { storeCreatedSql, type IdempotentWrite, type KeyedOutcome } from '../idempotency/write.js'
import { groupWritten } from './write-groups.js'
import type { Message, NewMessage } from '../schemas/messages.js'

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
  idempotency: IdempotentWrite | null
  /** performance.now() when it was queued. */
  queuedAt: number
  resolve: (result: Message | KeyedOutcome) => void
  reject: (err: unknown) => void
}

// A message id drawn ahead of its insert. The sequence is looked up once per statement (an InitPlan),
// not once per row as a bare pg_get_serial_sequence() would be.
const NEXT_ID = sql.raw("nextval((SELECT pg_get_serial_sequence('messages', 'id')::regclass))")

/** A written message with the place of its create in the group (1-based, as WITH ORDINALITY counts). */
type WrittenRow = MessageRow & { ord: number }

// The author is found by subject in the same statement: a create costs one round trip, and a caller
// without a local user yet simply gets no row back. Rows are told apart by the ordinality of their
// input, never by their content: the database may store another text than the one sent. Ids are
// drawn first so each returned row carries its input's place.
const insertGroup = statement<WrittenRow>('messages_insert', sql`
  WITH input AS (
    SELECT * FROM unnest(${sql.placeholder('subjectIds')}::text[], ${sql.placeholder('contents')}::text[],
      ${sql.placeholder('subjects')}::text[], ${sql.placeholder('priorities')}::text[]) WITH ORDINALITY
      AS i(subject_id, content, subject, priority, ord)),
  prepared AS MATERIALIZED (
    SELECT ${NEXT_ID} AS id, i.ord, i.content, i.subject,
      i.priority::message_priority AS priority, u.id AS author_id, u.name AS author_name
    FROM input i JOIN users u ON u.subject_id = i.subject_id),
  inserted AS (
    INSERT INTO messages (id, content, subject, priority, author_id) OVERRIDING SYSTEM VALUE
    SELECT p.id, p.content, p.subject, p.priority, p.author_id FROM prepared p ORDER BY p.id
    RETURNING id, content, subject, priority, author_id, created_at)
  SELECT p.ord::float8 AS ord, m.id::float8 AS id, m.content, m.subject, m.priority::text AS priority,
    m.author_id::float8 AS author_id, p.author_name, ${sql.raw(isoTimestamp('m.created_at'))} AS created_at
  FROM inserted m JOIN prepared p ON p.id = m.id`)

type KeyedRow = MessageRow & { ord: number, written: boolean, body: string | null, location: string | null }

// A group in which some creates carry an Idempotency-Key. Ids are drawn first, so each key's 201
// (body and Location) is rendered and stored (src/idempotency/write.ts) by the same statement that
// inserts its message: both are committed together or not at all. A create whose key is already held
// stores nothing, and its message is not written.
const insertKeyedGroup = statement<KeyedRow>('messages_insert_keyed', sql`
  WITH input AS (
    SELECT * FROM unnest(${sql.placeholder('subjectIds')}::text[], ${sql.placeholder('contents')}::text[],
      ${sql.placeholder('subjects')}::text[], ${sql.placeholder('priorities')}::text[],
      ${sql.placeholder('keys')}::text[], ${sql.placeholder('fingerprints')}::text[]) WITH ORDINALITY
      AS i(subject_id, content, subject, priority, key, fingerprint, ord)),
  prepared AS MATERIALIZED (
    SELECT ${NEXT_ID} AS id, i.ord, i.subject_id, i.content, i.subject,
      i.priority::message_priority AS priority, i.key, i.fingerprint, u.id AS author_id, u.name AS author_name, now() AS created_at
    FROM input i JOIN users u ON u.subject_id = i.subject_id),
  stored AS (
    ${storeCreatedSql({
      from: sql`prepared p`,
      location: sql.raw(`'${MESSAGES_PATH}/' || p.id::text`),
      body: messageJsonSql('p'),
      ttlHours: sql`${sql.placeholder('ttlHours')}`
    })}),
  inserted AS (
    INSERT INTO messages (id, content, subject, priority, author_id, created_at) OVERRIDING SYSTEM VALUE
    SELECT p.id, p.content, p.subject, p.priority, p.author_id, p.created_at FROM prepared p
    WHERE p.key IS NULL OR p.id IN (SELECT message_id FROM stored) ORDER BY p.id
    RETURNING id)
  SELECT p.ord::float8 AS ord, m.id IS NOT NULL AS written, s.body, s.location,
    p.id::float8 AS id, p.content, p.subject, p.priority::text AS priority, p.author_id::float8 AS author_id,
    p.author_name, ${sql.raw(isoTimestamp('p.created_at'))} AS created_at
  FROM prepared p LEFT JOIN inserted m ON m.id = p.id LEFT JOIN stored s ON s.message_id = p.id`)

/** The rows of a group by the place of their create in it; a create without a row had no local user. */
const byOrdinality = <Row extends { ord: number }>(rows: Row[]): Map<number, Row> => new Map(rows.map((row) => [row.ord, row]))

const columns = (group: Pending[]) => ({
  subjectIds: group.map((p) => p.subjectId),
  contents: group.map((p) => p.content),
  subjects: group.map((p) => p.subject),
  priorities: group.map((p) => p.priority)
})

export interface MessageWriterOptions {
  /** IDEMPOTENCY_TTL_HOURS: a stored key older than this is treated as absent. */
  idempotencyTtlHours: number
}

export function createMessageWriter (db: Database, options: MessageWriterOptions) {
  let queue: Pending[] = []
  let inFlight = 0

  async function writePlain (group: Pending[]): Promise<void> {
    const rows = byOrdinality(await insertGroup(db, columns(group)))
    group.forEach((p, index) => {
      const row = rows.get(index + 1)
      p.resolve(row === undefined ? null : toMessage(row))
    })
  }

  async function writeKeyed (group: Pending[]): Promise<void> {
    const rows = await insertKeyedGroup(db, {
      ...columns(group),
      keys: group.map((p) => p.idempotency?.key ?? null),
      fingerprints: group.map((p) => p.idempotency?.fingerprint ?? null),
      ttlHours: options.idempotencyTtlHours
    })
    const byOrd = byOrdinality(rows)
    group.forEach((p, index) => {
      const row = byOrd.get(index + 1)
      if (row === undefined) return p.resolve(null)
      if (p.idempotency === null) return p.resolve(toMessage(row))
      p.resolve(row.written && row.body !== null && row.location !== null ? { created: { status: 201, location: row.location, body: row.body } } : 'taken')
    })
  }

  // The statement without keys stays the one plain creates have always used.
  const write = async (group: Pending[]): Promise<void> =>
    group.some((p) => p.idempotency !== null) ? writeKeyed(group) : writePlain(group)

  function flush (): void {
    while (inFlight < MAX_IN_FLIGHT && queue.length > 0) {
      const group = queue.slice(0, MAX_GROUP)
      queue = queue.slice(group.length)
      inFlight++
      const sentAt = performance.now()
      write(group)
        .then(() => { groupWritten(group.length, group[0]!.queuedAt, sentAt) })
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

  function enqueue (subjectId: string, input: NewMessage, idempotency: IdempotentWrite | null): Promise<Message | KeyedOutcome> {
    return new Promise((resolve, reject) => {
      queue.push({ subjectId, content: input.content, subject: input.subject ?? null, priority: input.priority ?? 'normal', idempotency, queuedAt: performance.now(), resolve, reject })
      flush()
    })
  }

  return {
    create (subjectId: string, input: NewMessage): Promise<Message | null> {
      return enqueue(subjectId, input, null) as Promise<Message | null>
    },

    /** A create under an Idempotency-Key: the message and its stored 201 are written together. */
    createKeyed (subjectId: string, input: NewMessage, idempotency: IdempotentWrite): Promise<KeyedOutcome> {
      return enqueue(subjectId, input, idempotency) as Promise<KeyedOutcome>
    }
  }
}
