import { parseArgs } from 'node:util'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { pathToFileURL } from 'node:url'
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import { createDb, type Database } from '../src/db/client.js'
import type { PRIORITY_VALUES, ROLE_VALUES } from '../src/db/schema.js'
import { createRandom } from './seeded-random.js'

const USAGE = `Usage: npm run seed -- [--messages <n>] [--users <n>] [--if-empty]

Fills the database at DATABASE_URL (unset: the embedded PGlite under ./.data/) with demo data.

Options:
  --messages <n>  messages to insert (default 100000)
  --users <n>     seed users (message authors) to ensure, subjects seed-user-1..n (default 1000)
  --if-empty      insert only what is missing to reach --messages rows in total
  -h, --help      show this help
`

type Priority = typeof PRIORITY_VALUES[number]
type Role = typeof ROLE_VALUES[number]

/**
 * Words that occur in a known share of messages (at most once each), so search benchmarks and demos have
 * something to find: `quokka` is the common term the benchmark searches for, the others are rarer.
 */
export const SEARCH_WORDS = { quokka: 0.075, aurora: 0.02, zeppelin: 0.003, kumquat: 0.001 } as const

const FIRST_NAMES = ['Ada', 'Alan', 'Amara', 'Ana', 'Arjun', 'Beatriz', 'Ben', 'Carlos', 'Chen', 'Chloe', 'Daniel', 'Dmitri',
  'Elena', 'Emeka', 'Fatima', 'Felix', 'Grace', 'Hana', 'Hugo', 'Ines', 'Isaac', 'Jamal', 'Jin', 'Julia', 'Kai', 'Karin',
  'Lars', 'Leila', 'Liam', 'Lucia', 'Maya', 'Mateo', 'Mei', 'Nadia', 'Noah', 'Olga', 'Omar', 'Priya', 'Rafael', 'Rosa',
  'Sami', 'Sara', 'Sofia', 'Tariq', 'Tomas', 'Uma', 'Victor', 'Wen', 'Yara', 'Zoe']
const LAST_NAMES = ['Adeyemi', 'Alvarez', 'Andersson', 'Becker', 'Costa', 'Dubois', 'Eriksen', 'Fernandes', 'Fischer', 'Garcia',
  'Haddad', 'Hansen', 'Ivanova', 'Jensen', 'Kim', 'Kowalski', 'Lee', 'Lopez', 'Martin', 'Meyer', 'Moreau', 'Mueller',
  'Nakamura', 'Nguyen', 'Novak', 'Okafor', 'Olsen', 'Patel', 'Petrov', 'Quinn', 'Rossi', 'Santos', 'Schmidt', 'Silva',
  'Singh', 'Smith', 'Suzuki', 'Tanaka', 'Torres', 'Wang', 'Weber', 'Wilson', 'Yilmaz', 'Zhang']

export const SUBJECTS = ['Weekly sync', 'Deployment window', 'Quarterly planning', 'Incident follow-up', 'Lunch on Friday',
  'Release notes', 'Budget review', 'Onboarding checklist', 'Customer feedback', 'Design review', 'Hiring update',
  'Security patch', 'Database migration', 'On-call handover', 'Team offsite', 'Roadmap draft', 'Invoice question',
  'Travel plans', 'Office move', 'Performance report', 'API changes', 'Holiday schedule', 'Training session',
  'Vendor contract', 'Bug triage', 'Sprint retrospective', 'Support escalation', 'Feature request', 'Status update',
  'Welcome aboard']

const NOUNS = ['report', 'meeting', 'deadline', 'server', 'customer', 'invoice', 'draft', 'ticket', 'release', 'budget',
  'schedule', 'dashboard', 'proposal', 'backup', 'contract', 'feature', 'team', 'query', 'build', 'review', 'document',
  'cluster', 'roadmap', 'survey', 'workshop', 'pipeline', 'printer', 'kitchen', 'badge', 'laptop']
const ADJECTIVES = ['new', 'updated', 'final', 'urgent', 'quarterly', 'shared', 'broken', 'slow', 'quick', 'revised',
  'important', 'internal', 'pending', 'weekly', 'monthly', 'large', 'small', 'old', 'temporary', 'public']
const VERBS = ['reviewed', 'moved', 'approved', 'fixed', 'postponed', 'deployed', 'cancelled', 'shared', 'updated',
  'checked', 'restarted', 'scheduled', 'signed', 'merged', 'archived', 'tested', 'rolled back', 'booked']
const ADVERBS = ['today', 'tomorrow', 'this morning', 'before lunch', 'next week', 'again', 'as planned', 'on Monday',
  'by Friday', 'last night', 'in the afternoon', 'right away']
const OPENERS = ['Hi all,', 'Quick note:', 'FYI', 'Heads up:', 'Hello team,', 'Reminder:', 'Good news:', 'Update:']
const CLOSERS = ['Thanks!', 'Let me know if anything is unclear.', 'Questions welcome.', 'See you there.', 'Cheers.']

const pick = <T> (random: () => number, items: readonly T[]): T => items[Math.floor(random() * items.length)] as T

function weighted<T extends string> (random: () => number, weights: ReadonlyArray<readonly [T, number]>): T {
  let r = random()
  for (const [value, weight] of weights) {
    r -= weight
    if (r < 0) return value
  }
  return weights[weights.length - 1]![0]
}

const PRIORITY_WEIGHTS = [['low', 0.2], ['normal', 0.6], ['high', 0.15], ['urgent', 0.05]] as const
const SENTENCE_COUNTS = [['1', 0.4], ['2', 0.3], ['3', 0.2], ['4', 0.1]] as const
const ROLE_WEIGHTS = [['User', 0.88], ['Moderator', 0.08], ['Admin', 0.04]] as const

export interface SeedUser {
  subjectId: string
  name: string
  email: string
  role: Role
}

/** The n-th seed user (from 1), the same on every run; the benchmark mints tokens for these. */
export function seedUser (n: number): SeedUser {
  const random = createRandom(n * 7919)
  const first = pick(random, FIRST_NAMES)
  const last = pick(random, LAST_NAMES)
  // One owner and a couple of super admins, as in a real organisation; the rest mostly plain users.
  const role: Role = n === 1 ? 'Owner' : n <= 3 ? 'SuperAdmin' : weighted(random, ROLE_WEIGHTS)
  return { subjectId: `seed-user-${n}`, name: `${first} ${last}`, email: `${first}.${last}${n}@example.com`.toLowerCase(), role }
}

function sentence (random: () => number): string {
  const parts: string[] = []
  switch (Math.floor(random() * 4)) {
    case 0: parts.push('The', pick(random, ADJECTIVES), pick(random, NOUNS), 'was', pick(random, VERBS), pick(random, ADVERBS)); break
    case 1: parts.push('We', pick(random, VERBS), 'the', pick(random, NOUNS), 'and the', pick(random, ADJECTIVES), pick(random, NOUNS), pick(random, ADVERBS)); break
    case 2: parts.push('Can someone check the', pick(random, ADJECTIVES), pick(random, NOUNS), pick(random, ADVERBS) + '?'); break
    default: parts.push('Please note that the', pick(random, NOUNS), 'for the', pick(random, NOUNS), 'is', pick(random, ADJECTIVES))
  }
  const text = parts.join(' ')
  return /[?.!]$/.test(text) ? text : text + '.'
}

// Sentences are drawn from a fixed pool: 4,096 sentences in combinations of one to four keep the texts varied,
// and a million messages are generated several times faster than sentence by sentence.
const SENTENCE_POOL_SIZE = 4096
let pool: string[] | undefined
function sentencePool (): string[] {
  if (pool === undefined) {
    const random = createRandom(20_240_601)
    pool = Array.from({ length: SENTENCE_POOL_SIZE }, () => sentence(random))
  }
  return pool
}

/**
 * Phrases the generator writes, each in a small share of messages (a fraction of a percent): an
 * adjective with a noun ("broken laptop"), two nouns ("badge for the kitchen"). The benchmark's cold
 * search asks for a different one with every request.
 */
export function rarePhrases (): string[] {
  return [
    ...ADJECTIVES.flatMap((adjective) => NOUNS.map((noun) => `${adjective} ${noun}`)),
    ...NOUNS.flatMap((first) => NOUNS.filter((second) => second !== first).map((second) => `${first} for the ${second}`))
  ]
}

/** Puts the word into one sentence, after its first word, so it reads as part of the text. */
function insertWord (random: () => number, text: string, word: string): string {
  const words = text.split(' ')
  words.splice(1 + Math.floor(random() * Math.max(1, words.length - 1)), 0, word)
  return words.join(' ')
}

/** One to four sentences, mostly short, sometimes with a greeting and a sign-off. */
export function messageContent (random: () => number): string {
  const pool = sentencePool()
  const count = Number(weighted(random, SENTENCE_COUNTS))
  const sentences: string[] = []
  for (let i = 0; i < count; i++) sentences.push(pool[Math.floor(random() * pool.length)]!)
  // Decided per message, not per sentence, so each word's share of messages is exactly its weight.
  for (const [word, share] of Object.entries(SEARCH_WORDS)) {
    if (random() < share) {
      const at = Math.floor(random() * sentences.length)
      sentences[at] = insertWord(random, sentences[at]!, word)
    }
  }
  if (random() < 0.3) sentences.unshift(pick(random, OPENERS))
  if (random() < 0.2) sentences.push(pick(random, CLOSERS))
  return sentences.join(' ')
}

export interface GeneratedMessage {
  content: string
  subject: string | null
  priority: Priority
}

export function generateMessage (random: () => number): GeneratedMessage {
  return {
    content: messageContent(random),
    subject: random() < 0.6 ? pick(random, SUBJECTS) : null,
    priority: weighted(random, PRIORITY_WEIGHTS)
  }
}

export interface SeedOptions {
  url: string | undefined
  /** The embedded database's directory when url is undefined (default ./.data/pglite). */
  dataDir?: string
  messages: number
  users: number
  ifEmpty: boolean
  /** No progress output (tests, callers that print their own). */
  quiet?: boolean
}

export interface SeedSummary {
  users: number
  newUsers: number
  insertedMessages: number
  totalMessages: number
  seconds: number
}

const BATCH_ROWS = 10_000
const REBUILD_INDEXES_AT = 20_000
const YEAR_MS = 365 * 24 * 3600 * 1000

// postgres-js returns an array of rows, PGlite an object with `rows`.
function rowsOf<T> (result: unknown): T[] {
  return Array.isArray(result) ? result as T[] : (result as { rows: T[] }).rows
}

async function countMessages (db: Database): Promise<number> {
  const [row] = rowsOf<{ n: number }>(await db.execute(sql`select count(*)::int as n from messages`))
  return Number(row?.n ?? 0)
}

// Accounts are older than the messages, spread over the months before them.
const userCreatedAt = (n: number): string => new Date(Date.now() - YEAR_MS - (1 + n % 90) * 86_400_000).toISOString()

async function insertUsers (db: Database, count: number): Promise<number> {
  let created = 0
  for (let start = 1; start <= count; start += BATCH_ROWS) {
    const batch = Array.from({ length: Math.min(BATCH_ROWS, count - start + 1) }, (_, i) => {
      const user = seedUser(start + i)
      return { ...user, createdAt: userCreatedAt(start + i) }
    })
    const result = await db.execute(sql`
      insert into users (subject_id, name, email, role, created_at, updated_at)
      select subject_id, name, email, role, created_at, created_at
      from json_to_recordset(${JSON.stringify(batch.map((u) => ({
        subject_id: u.subjectId, name: u.name, email: u.email, role: u.role, created_at: u.createdAt
      })))}::json) as x(subject_id text, name text, email text, role text, created_at timestamptz)
      on conflict (subject_id) do nothing
      returning id`)
    created += rowsOf(result).length
  }
  return created
}

async function insertMessages (db: Database, count: number, authorIds: number[], progress: (done: number) => void): Promise<void> {
  const random = createRandom(count * 31 + authorIds.length)
  const now = Date.now()
  // Sorted, so ids and createdAt grow together as they do in a live table.
  const times = Array.from({ length: count }, () => now - random() * YEAR_MS).sort((a, b) => a - b)
  // The bar's clock starts here, as COPY's does, so the first batch's rate is not taken over no time.
  progress(0)
  for (let start = 0; start < count; start += BATCH_ROWS) {
    const batch = []
    for (let i = start; i < Math.min(count, start + BATCH_ROWS); i++) {
      const message = generateMessage(random)
      // Cubed: a few authors write most messages, as in real workspaces.
      const author = authorIds[Math.floor(random() ** 3 * authorIds.length)]
      batch.push({ ...message, author_id: author, created_at: new Date(times[i]!).toISOString() })
    }
    await db.execute(sql`
      insert into messages (content, subject, priority, author_id, created_at)
      select content, subject, priority, author_id, created_at
      from json_to_recordset(${JSON.stringify(batch)}::json)
        as x(content text, subject text, priority message_priority, author_id bigint, created_at timestamptz)`)
    progress(Math.min(count, start + BATCH_ROWS))
  }
}

/** Drops the messages indexes that no constraint needs and returns their definitions, to recreate them as they were. */
async function dropSecondaryIndexes (db: Database): Promise<string[]> {
  const rows = rowsOf<{ name: string, definition: string }>(await db.execute(sql`
    select i.relname as name, pg_get_indexdef(i.oid) as definition
    from pg_index x
    join pg_class i on i.oid = x.indexrelid
    where x.indrelid = 'messages'::regclass
      and not exists (select 1 from pg_constraint c where c.conindid = i.oid)`))
  for (const { name } of rows) await db.execute(sql`drop index ${sql.identifier(name)}`)
  return rows.map((r) => r.definition)
}

/** Reports progress: a redrawn bar on a terminal, a plain line every 10% otherwise (logs, CI). */
export function createProgress (total: number, stream: NodeJS.WriteStream | null): (done: number) => void {
  // The clock starts at the first report (call it with 0 when loading begins), so set-up is not counted.
  let started: number | undefined
  let lastTenth = 0
  return (done) => {
    started ??= performance.now()
    if (stream === null || total === 0 || done === 0) return
    const share = done / total
    const rate = done / Math.max(0.001, (performance.now() - started) / 1000)
    const figures = `${done.toLocaleString('en-US')}/${total.toLocaleString('en-US')} messages, ${Math.round(rate).toLocaleString('en-US')} rows/s`
    if (stream.isTTY === true) {
      const width = 30
      const filled = Math.round(share * width)
      stream.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${(share * 100).toFixed(0).padStart(3)}% ${figures}` + (done >= total ? '\n' : ''))
    } else if (Math.floor(share * 10) > lastTenth || done >= total) {
      lastTenth = Math.floor(share * 10)
      stream.write(`seed: ${(share * 100).toFixed(0)}% ${figures}\n`)
    }
  }
}

const TWO_DIGITS = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0'))
let dayCache = { day: Number.NaN, prefix: '' }

/** The UTC timestamp as COPY text (`2025-06-01 12:34:56.789+00`); the date part is cached, since times arrive sorted. */
export function copyTimestamp (ms: number): string {
  const day = Math.floor(ms / 86_400_000)
  if (day !== dayCache.day) dayCache = { day, prefix: new Date(day * 86_400_000).toISOString().slice(0, 10) }
  const t = Math.floor(ms) - day * 86_400_000
  const millis = t % 1000
  const seconds = Math.floor(t / 1000)
  return `${dayCache.prefix} ${TWO_DIGITS[Math.floor(seconds / 3600)]!}:${TWO_DIGITS[Math.floor(seconds / 60) % 60]!}:${TWO_DIGITS[seconds % 60]!}.${String(millis).padStart(3, '0')}+00`
}

// COPY text format: backslash, tab and line breaks are escaped; \N is NULL.
const copyText = (value: string | null): string => value === null ? '\\N' : value.replace(/[\\\t\n\r]/g, (c) => c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r')

const COPY_ROWS = 200_000
const CHUNK_ROWS = 5_000

/** COPY lines of generated messages, CHUNK_ROWS at a time, for rows [start, end) of the whole load. */
function * copyChunks (random: () => number, times: number[], authorIds: number[], start: number, end: number, progress: (done: number) => void): Generator<string> {
  for (let chunk = start; chunk < end; chunk += CHUNK_ROWS) {
    let text = ''
    for (let i = chunk; i < Math.min(end, chunk + CHUNK_ROWS); i++) {
      const m = generateMessage(random)
      const author = authorIds[Math.floor(random() ** 3 * authorIds.length)]!
      text += `${copyText(m.content)}\t${copyText(m.subject)}\t${m.priority}\t${author}\t${copyTimestamp(times[i]!)}\n`
    }
    yield text
    progress(Math.min(end, chunk + CHUNK_ROWS))
  }
}

/**
 * PostgreSQL: COPY in statements of COPY_ROWS rows. Triggers stay enabled (statement-level ones fire once per
 * COPY), so every counter they keep stays exact.
 */
async function copyMessages (sql: postgres.TransactionSql, count: number, authorIds: number[], progress: (done: number) => void): Promise<void> {
  const random = createRandom(count * 31 + authorIds.length)
  const now = Date.now()
  const times = Array.from({ length: count }, () => now - random() * YEAR_MS).sort((a, b) => a - b)
  progress(0)
  for (let start = 0; start < count; start += COPY_ROWS) {
    const writable = await sql`copy messages (content, subject, priority, author_id, created_at) from stdin`.writable()
    await pipeline(Readable.from(copyChunks(random, times, authorIds, start, Math.min(count, start + COPY_ROWS), progress)), writable)
  }
}

async function seedPostgres (url: string, options: SeedOptions, existing: number, toInsert: number, progress: (done: number) => void): Promise<number> {
  const client = postgres(url, { max: 1, onnotice: () => {} })
  try {
    let newUsers = 0
    await client.begin(async (tx) => {
      const users = Array.from({ length: options.users }, (_, i) => {
        const user = seedUser(i + 1)
        return { subject_id: user.subjectId, name: user.name, email: user.email, role: user.role, created_at: userCreatedAt(i + 1) }
      })
      for (let start = 0; start < users.length; start += BATCH_ROWS) {
        const created = await tx`
          insert into users (subject_id, name, email, role, created_at, updated_at)
          select subject_id, name, email, role, created_at, created_at
          from json_to_recordset(${JSON.stringify(users.slice(start, start + BATCH_ROWS))}::text::json)
            as x(subject_id text, name text, email text, role text, created_at timestamptz)
          on conflict (subject_id) do nothing
          returning id`
        newUsers += created.length
      }
      const authorIds = (await tx<Array<{ id: string }>>`select id from users order by id`).map((r) => Number(r.id))
      // Index builds after a bulk load are the longest step; more sort memory for this transaction only.
      await tx`set local maintenance_work_mem = '256MB'`
      const rebuild = toInsert >= REBUILD_INDEXES_AT && toInsert >= existing
      // A bulk load checks the author key once with one join (as pg_restore does), not row by row.
      const indexes = rebuild ? await dropIndexesPostgres(tx) : []
      const foreignKeys = rebuild ? await dropForeignKeysPostgres(tx) : []
      if (toInsert > 0) await copyMessages(tx, toInsert, authorIds, progress)
      for (const definition of indexes) await tx.unsafe(definition)
      for (const { name, definition } of foreignKeys) await tx.unsafe(`alter table messages add constraint "${name}" ${definition}`)
    })
    // The load's counter slots folded into one row per bucket, as the service's compaction would.
    await client`select pagination_compact()`
    // Vacuum too: it sets the visibility map, so count(*) can use index-only scans as on a settled table,
    // and clears the counter rows the load and the compaction replaced.
    await client`vacuum (analyze) users, messages, pagination_counts`
    return newUsers
  } finally {
    await client.end({ timeout: 5 })
  }
}

async function dropForeignKeysPostgres (tx: postgres.TransactionSql): Promise<Array<{ name: string, definition: string }>> {
  const rows = await tx<Array<{ name: string, definition: string }>>`
    select conname as name, pg_get_constraintdef(oid) as definition
    from pg_constraint where conrelid = 'messages'::regclass and contype = 'f'`
  for (const { name } of rows) await tx`alter table messages drop constraint ${tx(name)}`
  return rows
}

async function dropIndexesPostgres (tx: postgres.TransactionSql): Promise<string[]> {
  const rows = await tx<Array<{ name: string, definition: string }>>`
    select i.relname as name, pg_get_indexdef(i.oid) as definition
    from pg_index x
    join pg_class i on i.oid = x.indexrelid
    where x.indrelid = 'messages'::regclass
      and not exists (select 1 from pg_constraint c where c.conindid = i.oid)`
  for (const { name } of rows) await tx`drop index ${tx(name)}`
  return rows.map((r) => r.definition)
}

export async function seedDatabase (options: SeedOptions): Promise<SeedSummary> {
  const started = performance.now()
  const handle = await createDb({ url: options.url, dataDir: options.dataDir, statementTimeoutMs: 0 })
  let existing: number
  let toInsert: number
  const progressOf = (total: number): (done: number) => void => createProgress(total, options.quiet === true ? null : process.stderr)
  try {
    await handle.migrate()
    existing = await countMessages(handle.db)
    toInsert = options.ifEmpty ? Math.max(0, options.messages - existing) : options.messages
    if (handle.driver === 'pglite') {
      let newUsers = 0
      if (toInsert > 0 || !options.ifEmpty) {
        await handle.db.transaction(async (tx) => {
          newUsers = await insertUsers(tx, options.users)
          const authorIds = rowsOf<{ id: number | string }>(await tx.execute(sql`select id from users order by id`)).map((r) => Number(r.id))
          // Maintaining the trigram GIN indexes row by row costs far more than building them once.
          const rebuild = toInsert >= REBUILD_INDEXES_AT && toInsert >= existing
          const indexes = rebuild ? await dropSecondaryIndexes(tx) : []
          if (toInsert > 0) await insertMessages(tx, toInsert, authorIds, progressOf(toInsert))
          for (const definition of indexes) await tx.execute(sql.raw(definition))
        })
      }
      return summary(options, newUsers, existing, toInsert, started)
    }
  } finally {
    await handle.close()
  }
  const newUsers = toInsert > 0 || !options.ifEmpty ? await seedPostgres(options.url!, options, existing, toInsert, progressOf(toInsert)) : 0
  return summary(options, newUsers, existing, toInsert, started)
}

function summary (options: SeedOptions, newUsers: number, existing: number, toInsert: number, started: number): SeedSummary {
  return {
    users: options.users,
    newUsers,
    insertedMessages: toInsert,
    totalMessages: existing + toInsert,
    seconds: (performance.now() - started) / 1000
  }
}

export function formatSummary (s: SeedSummary): string {
  return `seed: ${s.newUsers} new users (${s.users} seed users), ${s.insertedMessages} messages inserted, ` +
    `${s.totalMessages} in total, ${s.seconds.toFixed(2)} s (${Math.round(s.insertedMessages / s.seconds).toLocaleString('en-US')} rows/s overall)`
}

function positiveInteger (name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new Error(`--${name} must be a positive whole number`)
  return Number(value)
}

async function main (args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      messages: { type: 'string' },
      users: { type: 'string' },
      'if-empty': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) {
    process.stdout.write(USAGE)
    return
  }
  const result = await seedDatabase({
    url: process.env.DATABASE_URL === '' ? undefined : process.env.DATABASE_URL,
    messages: positiveInteger('messages', values.messages, 100_000),
    users: positiveInteger('users', values.users, 1000),
    ifEmpty: values['if-empty'] === true
  })
  process.stdout.write(formatSummary(result) + '\n')
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    await main(process.argv.slice(2))
  } catch (err) {
    process.stderr.write(`seed: ${(err as Error).message}\n`)
    process.exitCode = 1
  }
}
