import type { Test } from 'tap'
import type { App } from '../../src/app.js'
import type { AppConfig } from '../../src/config.js'
import {
  ADMIN, assertExact, buildWithUrl, isoSql, lit, rawRows, Rng, run, type Combination
} from './exactness.js'

// A messages table built by rounds of writes through the API and through direct SQL, and the list
// and search checks that compare it page by page with a naive ORDER BY ... LIMIT/OFFSET and count(*).

const PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const
const SUBJECTS = ['alpha', 'beta', 'gamma', 'Delta'] as const
const SORTS: Record<string, string> = { id: 'id', createdAt: 'created_at', priority: 'priority', subject: 'subject' }
export const SEARCH_TERMS = ['lorem', 'ZYZZYVA', 'zyzzyva', '50%_off', '%', '_', 'MiXeD', 'alpha', 'nothing-matches-this', 'brown FOX', 'mps lorem']
// A few instants many rows share, so ties on created_at are broken by id.
const SHARED_INSTANTS = ['2019-03-01T12:00:00.000Z', '2021-07-15T08:30:00.000Z', '2024-01-01T00:00:00.000Z']
const FROM = Date.parse('2012-01-01T00:00:00Z')
const TO = Date.parse('2026-06-01T00:00:00Z')
const MAX_ID = 2 ** 26

export interface World { app: App, rng: Rng, usedIds: Set<number>, unique: number }

function content (rng: Rng): string {
  const words = ['quick', 'brown', 'fox', 'jumps']
  if (rng.chance(0.8)) words.push('lorem')
  if (rng.chance(0.03)) words.push(rng.chance(0.5) ? 'zyzzyva' : 'ZyZzYvA')
  if (rng.chance(0.05)) words.push('50%_off')
  if (rng.chance(0.05)) words.push('mixed')
  if (rng.chance(0.05)) words.push('back\\slash')
  return rng.sample(words, words.length).join(' ')
}

function subject (w: World): string | null {
  if (w.rng.chance(0.2)) return null
  if (w.rng.chance(0.05)) return `only-${w.unique++}`
  return w.rng.pick(SUBJECTS)
}

function createdAt (rng: Rng): string {
  if (rng.chance(0.3)) return rng.pick(SHARED_INSTANTS)
  if (rng.chance(0.1)) return new Date(Date.parse('2023-05-05T05:05:00Z') + rng.int(0, 59_999)).toISOString()
  return new Date(rng.int(FROM, TO)).toISOString()
}

/** Fresh explicit ids above the identity sequence's range: sparse ones and clustered runs. */
function freshIds (w: World, n: number): number[] {
  const ids: number[] = []
  while (ids.length < n) {
    const start = w.rng.int(100_000, MAX_ID - 100)
    const run = w.rng.chance(0.3) ? w.rng.int(5, 40) : 1
    for (let id = start; id < start + run && ids.length < n; id++) {
      if (!w.usedIds.has(id)) { w.usedIds.add(id); ids.push(id) }
    }
  }
  return ids
}

async function authorIds (w: World): Promise<number[]> {
  const rows = await rawRows<{ id: number }>(w.app, 'SELECT id::int AS id FROM users ORDER BY id')
  return rows.map((r) => Number(r.id))
}

export async function insertUsersBySql (w: World, n: number): Promise<void> {
  const values = Array.from({ length: n }, () => {
    const k = w.unique++
    const name = w.rng.chance(0.2) ? null : `Author ${k}`
    return `(${lit(`sql-author-${k}`)}, ${lit(name)}, ${lit(`a${k}@example.com`)}, 'User', ${lit(createdAt(w.rng))})`
  })
  await run(w.app, `INSERT INTO users (subject_id, name, email, role, created_at) VALUES ${values.join(', ')}`)
}

/** Multi-row INSERTs with explicit sparse ids, in batches. */
export async function insertMessagesBySql (w: World, n: number): Promise<void> {
  const authors = await authorIds(w)
  const ids = freshIds(w, n)
  for (let i = 0; i < ids.length; i += 150) {
    const values = ids.slice(i, i + 150).map((id) =>
      `(${id}, ${lit(content(w.rng))}, ${lit(subject(w))}, ${lit(w.rng.pick(PRIORITIES))}, ${w.rng.pick(authors)}, ${lit(createdAt(w.rng))})`)
    await run(w.app, `INSERT INTO messages (id, content, subject, priority, author_id, created_at) OVERRIDING SYSTEM VALUE VALUES ${values.join(', ')}`)
  }
}

export async function postMessages (t: Test, w: World, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const sub = w.rng.pick(['bob', 'carol', 'dave', 'erin', 'alice'])
    const payload: Record<string, string> = { content: content(w.rng) }
    const s = subject(w)
    if (s !== null) payload.subject = s
    if (w.rng.chance(0.7)) payload.priority = w.rng.pick(PRIORITIES)
    const res = await w.app.inject({ method: 'POST', url: '/v2/messages', headers: { 'x-test-user': JSON.stringify({ sub, role: 'User' }) }, payload })
    if (res.statusCode !== 201) t.fail(`POST /v2/messages: ${res.statusCode} ${res.body}`)
  }
}

async function randomMessageIds (w: World, n: number): Promise<number[]> {
  const rows = await rawRows<{ id: number }>(w.app, `SELECT id::int AS id FROM messages ORDER BY random() LIMIT ${n}`)
  return rows.map((r) => Number(r.id))
}

export async function deleteThroughApi (t: Test, w: World, n: number): Promise<void> {
  for (const id of await randomMessageIds(w, n)) {
    const res = await w.app.inject({ method: 'DELETE', url: `/v2/messages/${id}`, headers: { 'x-test-user': ADMIN } })
    if (res.statusCode !== 204) t.fail(`DELETE /v2/messages/${id}: ${res.statusCode} ${res.body}`)
  }
}

export async function deleteBySql (w: World): Promise<void> {
  const [single] = await randomMessageIds(w, 1)
  if (single !== undefined) await run(w.app, `DELETE FROM messages WHERE id = ${single}`)
  const from = w.rng.int(100_000, MAX_ID - 3_000_000)
  await run(w.app, `DELETE FROM messages WHERE id BETWEEN ${from} AND ${from + 3_000_000}`)
  const authors = await authorIds(w)
  await run(w.app, `DELETE FROM messages WHERE author_id = ${w.rng.pick(authors)}`)
  // Deleting a user removes their messages by cascade.
  const victims = await rawRows<{ id: number }>(w.app,
    "SELECT id::int AS id FROM users WHERE subject_id LIKE 'sql-author-%' AND EXISTS (SELECT 1 FROM messages WHERE author_id = users.id) ORDER BY id LIMIT 1")
  if (victims[0] !== undefined) await run(w.app, `DELETE FROM users WHERE id = ${victims[0].id}`)
}

export async function updateBySql (w: World): Promise<void> {
  const pick = async (n: number): Promise<string> => (await randomMessageIds(w, n)).join(', ') || '0'
  const authors = await authorIds(w)
  await run(w.app, `UPDATE messages SET priority = ${lit(w.rng.pick(PRIORITIES))} WHERE id IN (${await pick(40)})`)
  await run(w.app, `UPDATE messages SET author_id = ${w.rng.pick(authors)} WHERE id IN (${await pick(30)})`)
  await run(w.app, `UPDATE messages SET subject = ${lit(w.rng.pick(SUBJECTS))} WHERE id IN (${await pick(20)})`)
  await run(w.app, `UPDATE messages SET subject = NULL WHERE id IN (${await pick(10)})`)
  await run(w.app, `UPDATE messages SET created_at = ${lit(w.rng.pick(SHARED_INSTANTS))} WHERE id IN (${await pick(25)})`)
  await run(w.app, `UPDATE messages SET created_at = ${lit(createdAt(w.rng))} WHERE id IN (${await pick(5)})`)
}

/** Renames authors by SQL and touches nothing in messages: pages showing them must change all the same. */
export async function renameAuthorsBySql (w: World): Promise<void> {
  const authors = await authorIds(w)
  await run(w.app, `UPDATE users SET name = coalesce(name, 'author') || ' renamed' WHERE id IN (${w.rng.pick(authors)}, ${w.rng.pick(authors)})`)
}

/** Content updates that make rows newly match a rare search term and make others stop matching. */
export async function updateContentBySql (w: World): Promise<void> {
  await run(w.app, `UPDATE messages SET content = content || ' zyzzyva' WHERE id IN (${(await randomMessageIds(w, 6)).join(', ')})`)
  await run(w.app, "UPDATE messages SET content = 'plain words' WHERE id IN (SELECT id FROM messages WHERE content ILIKE '%zyzzyva%' ORDER BY id LIMIT 3)")
  await run(w.app, "UPDATE messages SET content = replace(content, 'lorem', 'ipsum') WHERE id IN (SELECT id FROM messages WHERE content LIKE '%lorem%' ORDER BY random() LIMIT 40)")
}

function likePattern (term: string): string {
  return `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
}

interface Filter { params: Record<string, string>, where: string }

export async function filters (w: World): Promise<Filter[]> {
  const authors = await authorIds(w)
  const priority = w.rng.pick(PRIORITIES)
  const author = w.rng.pick(authors)
  const subj = w.rng.pick(SUBJECTS)
  return [
    { params: {}, where: 'TRUE' },
    { params: { priority }, where: `priority = ${lit(priority)}` },
    { params: { authorId: String(author) }, where: `author_id = ${author}` },
    { params: { subject: subj }, where: `subject = ${lit(subj)}` },
    { params: { priority, authorId: String(author) }, where: `priority = ${lit(priority)} AND author_id = ${author}` },
    { params: { authorId: '999999999' }, where: 'author_id = 999999999' }
  ]
}

export function combinations (path: string, list: Filter[], extra: Filter): Combination[] {
  const out: Combination[] = []
  for (const f of list) {
    for (const [sort, column] of Object.entries(SORTS)) {
      for (const desc of [false, true]) {
        out.push({
          path,
          params: { ...extra.params, ...f.params, sort, order: desc ? 'desc' : 'asc' },
          table: 'messages',
          where: `(${extra.where}) AND (${f.where})`,
          orderColumn: column,
          desc
        })
      }
    }
  }
  return out
}

/** Compares each item with its row: content, subject, priority, author and createdAt. */
function itemChecker (app: App) {
  return async (ids: number[], items: unknown[]): Promise<string | null> => {
    const rows = await rawRows<Record<string, unknown>>(app,
      `SELECT m.id::int AS id, m.content, m.subject, m.priority::text AS priority, u.id::int AS author_id, u.name AS author_name,
              ${isoSql('m.created_at')} AS created_at
         FROM messages m JOIN users u ON u.id = m.author_id WHERE m.id IN (${ids.join(', ')})`)
    const byId = new Map(rows.map((r) => [Number(r.id), r]))
    const expected = ids.map((id) => {
      const r = byId.get(id)
      return r === undefined
        ? { id, missing: true }
        : { id, content: r.content, subject: r.subject, priority: r.priority, author: { id: Number(r.author_id), name: r.author_name }, createdAt: r.created_at }
    })
    return JSON.stringify(items) === JSON.stringify(expected) ? null : `items differ: expected ${JSON.stringify(expected)} got ${JSON.stringify(items)}`
  }
}

export async function checkList (t: Test, w: World, label: string): Promise<void> {
  const all = combinations('/v2/messages', await filters(w), { params: {}, where: 'TRUE' })
  await assertExact(t, w.app, w.rng, `${label}: list`, all, { checkItems: itemChecker(w.app) })
}

export async function checkSearch (t: Test, w: World, label: string, terms: readonly string[]): Promise<void> {
  const fs = await filters(w)
  const all: Combination[] = []
  for (const q of terms) {
    const search = { params: { q }, where: `content ILIKE ${lit(likePattern(q))} OR subject ILIKE ${lit(likePattern(q))}` }
    // A random sample of the unfiltered sorts and orders, and of the filtered combinations.
    const combos = combinations('/v2/messages/search', fs, search)
    all.push(...w.rng.sample(combos.slice(0, 8), 4), ...w.rng.sample(combos.slice(8), 3))
  }
  await assertExact(t, w.app, w.rng, `${label}: search ${terms.join(' | ')}`, all, { checkItems: itemChecker(w.app), itemRate: 0.1 })
}

export async function world (t: Test, seed: number, config: Partial<AppConfig> = {}): Promise<World> {
  const { app } = await buildWithUrl(t, config)
  const w: World = { app, rng: new Rng(seed), usedIds: new Set(), unique: 0 }
  // alice (Admin) deletes through the API; provision her first.
  await app.inject({ method: 'GET', url: '/v2/users/me', headers: { 'x-test-user': ADMIN } })
  await insertUsersBySql(w, 8)
  return w
}
