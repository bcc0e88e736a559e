import { parseArgs } from 'node:util'
import { pathToFileURL } from 'node:url'
import { sql } from 'drizzle-orm'
import { createDb, type Database } from '../src/db/client.js'
import type { PRIORITY_VALUES, ROLE_VALUES } from '../src/db/schema.js'

const USAGE = `Usage: npm run seed -- [--messages <n>] [--users <n>] [--if-empty]

Fills the database at DATABASE_URL (unset: the embedded PGlite under ./.data/) with demo data.

Options:
  --messages <n>  messages to insert (default 100000)
  --users <n>     seed users to ensure, subjects seed-user-1..n (default 500)
  --if-empty      insert only what is missing to reach --messages rows in total
  -h, --help      show this help
`

type Priority = typeof PRIORITY_VALUES[number]
type Role = typeof ROLE_VALUES[number]

/** Words that occur in a known share of messages, so search benchmarks and demos have something to find. */
export const SEARCH_WORDS = { quokka: 0.01, zeppelin: 0.003, aurora: 0.02, kumquat: 0.001 } as const

const FIRST_NAMES = ['Ada', 'Alan', 'Amara', 'Ana', 'Arjun', 'Beatriz', 'Ben', 'Carlos', 'Chen', 'Chloe', 'Daniel', 'Dmitri',
  'Elena', 'Emeka', 'Fatima', 'Felix', 'Grace', 'Hana', 'Hugo', 'Ines', 'Isaac', 'Jamal', 'Jin', 'Julia', 'Kai', 'Karin',
  'Lars', 'Leila', 'Liam', 'Lucia', 'Maya', 'Mateo', 'Mei', 'Nadia', 'Noah', 'Olga', 'Omar', 'Priya', 'Rafael', 'Rosa',
  'Sami', 'Sara', 'Sofia', 'Tariq', 'Tomas', 'Uma', 'Victor', 'Wen', 'Yara', 'Zoe']
const LAST_NAMES = ['Adeyemi', 'Alvarez', 'Andersson', 'Becker', 'Costa', 'Dubois', 'Eriksen', 'Fernandes', 'Fischer', 'Garcia',
  'Haddad', 'Hansen', 'Ivanova', 'Jensen', 'Kim', 'Kowalski', 'Lee', 'Lopez', 'Martin', 'Meyer', 'Moreau', 'Mueller',
  'Nakamura', 'Nguyen', 'Novak', 'Okafor', 'Olsen', 'Patel', 'Petrov', 'Quinn', 'Rossi', 'Santos', 'Schmidt', 'Silva',
  'Singh', 'Smith', 'Suzuki', 'Tanaka', 'Torres', 'Wang', 'Weber', 'Wilson', 'Yilmaz', 'Zhang']

const SUBJECTS = ['Weekly sync', 'Deployment window', 'Quarterly planning', 'Incident follow-up', 'Lunch on Friday',
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

/** mulberry32: a small deterministic generator, so the same seed gives the same data. */
export function createRandom (seed: number): () => number {
  let a = seed >>> 0
  return function random () {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

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
  for (const [word, share] of Object.entries(SEARCH_WORDS)) {
    if (random() < share) parts.splice(1 + Math.floor(random() * (parts.length - 1)), 0, word)
  }
  const text = parts.join(' ')
  return /[?.!]$/.test(text) ? text : text + '.'
}

/** One to four sentences, mostly short, sometimes with a greeting and a sign-off. */
export function messageContent (random: () => number): string {
  const sentences = Array.from({ length: Number(weighted(random, SENTENCE_COUNTS)) }, () => sentence(random))
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
  messages: number
  users: number
  ifEmpty: boolean
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

async function insertUsers (db: Database, count: number): Promise<number> {
  let created = 0
  for (let start = 1; start <= count; start += BATCH_ROWS) {
    const batch = Array.from({ length: Math.min(BATCH_ROWS, count - start + 1) }, (_, i) => {
      const user = seedUser(start + i)
      // Accounts are older than the messages, spread over the months before them.
      return { ...user, createdAt: new Date(Date.now() - YEAR_MS - (1 + (start + i) % 90) * 86_400_000).toISOString() }
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

async function insertMessages (db: Database, count: number, authorIds: number[]): Promise<void> {
  const random = createRandom(count * 31 + authorIds.length)
  const now = Date.now()
  // Sorted, so ids and createdAt grow together as they do in a live table.
  const times = Array.from({ length: count }, () => now - random() * YEAR_MS).sort((a, b) => a - b)
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

export async function seedDatabase (options: SeedOptions): Promise<SeedSummary> {
  const started = performance.now()
  const handle = await createDb({ url: options.url, statementTimeoutMs: 0 })
  try {
    await handle.migrate()
    const existing = await countMessages(handle.db)
    const toInsert = options.ifEmpty ? Math.max(0, options.messages - existing) : options.messages
    let newUsers = 0
    if (toInsert > 0 || !options.ifEmpty) {
      await handle.db.transaction(async (tx) => {
        newUsers = await insertUsers(tx, options.users)
        const authorIds = rowsOf<{ id: number | string }>(await tx.execute(sql`select id from users order by id`)).map((r) => Number(r.id))
        // Maintaining the trigram GIN indexes row by row costs far more than building them once.
        const rebuild = toInsert >= REBUILD_INDEXES_AT && toInsert >= existing
        const indexes = rebuild ? await dropSecondaryIndexes(tx) : []
        if (toInsert > 0) await insertMessages(tx, toInsert, authorIds)
        for (const definition of indexes) await tx.execute(sql.raw(definition))
      })
      // Vacuum too: it sets the visibility map, so count(*) can use index-only scans as on a settled table.
      if (handle.driver === 'postgres') await handle.db.execute(sql`vacuum (analyze) users, messages`)
    }
    return {
      users: options.users,
      newUsers,
      insertedMessages: toInsert,
      totalMessages: existing + toInsert,
      seconds: (performance.now() - started) / 1000
    }
  } finally {
    await handle.close()
  }
}

export function formatSummary (s: SeedSummary): string {
  return `seed: ${s.newUsers} new users (${s.users} seed users), ${s.insertedMessages} messages inserted, ` +
    `${s.totalMessages} in total, ${s.seconds.toFixed(2)} s`
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
  const summary = await seedDatabase({
    url: process.env.DATABASE_URL === '' ? undefined : process.env.DATABASE_URL,
    messages: positiveInteger('messages', values.messages, 100_000),
    users: positiveInteger('users', values.users, 500),
    ifEmpty: values['if-empty'] === true
  })
  process.stdout.write(formatSummary(summary) + '\n')
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    await main(process.argv.slice(2))
  } catch (err) {
    process.stderr.write(`seed: ${(err as Error).message}\n`)
    process.exitCode = 1
  }
}
