import { bigint, boolean, customType, index, integer, numeric, pgEnum, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core'
import { sql } from 'drizzle-orm'

export const ROLE_VALUES = ['User', 'Moderator', 'Admin', 'SuperAdmin', 'Owner'] as const
export const PRIORITY_VALUES = ['low', 'normal', 'high', 'urgent'] as const

// Declaration order is the sort order in PostgreSQL, so sort=priority ranks by urgency.
export const messagePriority = pgEnum('message_priority', PRIORITY_VALUES)

const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow()

// bigint ids: every safe integer is a valid path id (CONTRACT 10), so lookups never overflow int4.
const id = () => bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity()

export const users = pgTable('users', {
  id: id(),
  subjectId: text('subject_id').notNull().unique(),
  email: text('email'),
  name: text('name'),
  // Plain text, not an enum: a role unknown to this version must still be storable.
  role: text('role').notNull().default('User'),
  createdAt: createdAt(),
  updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow()
}, (t) => [
  index('users_role_id_idx').on(t.role, t.id),
  index('users_name_id_idx').on(t.name, t.id),
  index('users_email_id_idx').on(t.email, t.id),
  index('users_created_at_id_idx').on(t.createdAt, t.id)
])

export const messages = pgTable('messages', {
  id: id(),
  content: text('content').notNull(),
  subject: text('subject'),
  priority: messagePriority('priority').notNull().default('normal'),
  authorId: bigint('author_id', { mode: 'number' }).notNull().references(() => users.id, { onDelete: 'cascade' }),
  createdAt: createdAt()
}, (t) => [
  index('messages_created_at_id_idx').on(t.createdAt, t.id),
  index('messages_priority_id_idx').on(t.priority, t.id),
  index('messages_subject_id_idx').on(t.subject, t.id),
  // Pages of one priority by subject: the seek, the walk of a deep page and the anchors read it in
  // order, index only, rather than visiting every row of other priorities in subject order.
  index('messages_priority_subject_id_idx').on(t.priority, t.subject, t.id),
  index('messages_author_id_id_idx').on(t.authorId, t.id),
  // Search (CONTRACT 6): ILIKE on content and subject is served by trigram indexes. Content's is over
  // its words joined (src/search/match.ts), so a phrase's trigrams span its spaces.
  index('messages_content_words_trgm_idx').using('gin', sql`(replace(lower(${t.content}), ' ', '0')) gin_trgm_ops`),
  // A phrase's word joins (drizzle/0012): the three letters either side of each space between words.
  index('messages_content_joins_idx').using('gin', sql`message_word_joins(${t.content})`),
  index('messages_subject_trgm_idx').using('gin', t.subject.op('gin_trgm_ops'))
])

export const movies = pgTable('movies', {
  id: id(),
  title: text('title').notNull(),
  year: integer('year').notNull(),
  rating: numeric('rating', { precision: 3, scale: 1, mode: 'number' }).notNull(),
  genre: text('genre').notNull()
}, (t) => [
  index('movies_title_id_idx').on(t.title, t.id),
  index('movies_year_id_idx').on(t.year, t.id),
  index('movies_rating_id_idx').on(t.rating, t.id),
  index('movies_genre_id_idx').on(t.genre, t.id)
])

// The order-statistic index of drizzle/0006: exact row counts per filter value (`key`), and per
// bucket of a sort key (`dim`, `bucket`), kept by triggers in the writing transaction. Each writing
// backend adds to its own `slot` (its pid), so concurrent writers never wait on one row; readers sum
// the slots, and pagination_compact() folds them into slot 0. The table is partitioned by slot
// (drizzle/0019), which drizzle-kit does not model: the writers' slots in pagination_counts_written,
// slot 0 in pagination_counts_folded, each unique on these five columns (src/db/triggers/functions.ts).
export const paginationCounts = pgTable('pagination_counts', {
  tableName: text('table_name').notNull(),
  key: text('key').notNull(),
  dim: text('dim').notNull(),
  bucket: bigint('bucket', { mode: 'number' }).notNull(),
  slot: integer('slot').notNull(),
  n: bigint('n', { mode: 'number' }).notNull(),
  writes: bigint('writes', { mode: 'number' }).notNull().default(0)
})

// CONTRACT 12, idempotent creation: the 201 a caller's first request with a key got, stored in the
// statement that inserted the message, so a retry from any instance gets the same bytes back.
// Rows are pruned by age (created_at), once older than IDEMPOTENCY_TTL_HOURS.
export const idempotencyKeys = pgTable('idempotency_keys', {
  subjectId: text('subject_id').notNull(),
  key: text('key').notNull(),
  /** sha256 (hex) of the request body as canonical JSON. */
  fingerprint: text('fingerprint').notNull(),
  status: integer('status').notNull(),
  location: text('location').notNull(),
  /** The response body exactly as it was sent. */
  body: text('body').notNull(),
  messageId: bigint('message_id', { mode: 'number' }).notNull(),
  createdAt: createdAt()
}, (t) => [
  primaryKey({ columns: [t.subjectId, t.key] }),
  index('idempotency_keys_created_at_idx').on(t.createdAt)
])

// CONTRACT 12, delta sync (drizzle/0010). A 64-bit transaction id, which never wraps; read and written
// as its decimal text, since it may exceed Number.MAX_SAFE_INTEGER.
const xid8 = customType<{ data: string }>({ dataType: () => 'xid8' })

// The change log: which messages a transaction wrote (inserted, updated or deleted), one row per
// message and transaction, recorded by statement triggers whoever writes. Content is not copied: the
// feed reads the row as it is when it answers.
export const messageChanges = pgTable('message_changes', {
  xid: xid8('xid').notNull(),
  id: bigint('id', { mode: 'number' }).notNull()
}, (t) => [
  primaryKey({ columns: [t.xid, t.id] })
])

// One row: the feed's `epoch` grows with every TRUNCATE of messages, and `horizon` is the transaction
// id below which the log has been pruned. A token from another epoch, or from below the horizon, is 410.
export const syncState = pgTable('sync_state', {
  only: boolean('only').primaryKey().default(true),
  epoch: bigint('epoch', { mode: 'number' }).notNull().default(1),
  horizon: xid8('horizon').notNull().default('0')
})

// What the oldest running transaction was, now and then: pruning finds here the horizon that was
// current SYNC_RETENTION_HOURS ago, and deletes the log below it.
export const syncMarks = pgTable('sync_marks', {
  at: timestamp('at', { withTimezone: true, mode: 'date' }).primaryKey(),
  oldest: xid8('oldest').notNull()
})

export type UserRow = typeof users.$inferSelect
export type MessageRow = typeof messages.$inferSelect
export type MovieRow = typeof movies.$inferSelect
