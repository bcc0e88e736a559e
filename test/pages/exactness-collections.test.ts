import postgres from 'postgres'
import t from 'tap'
import type { App } from '../../src/app.js'
import { bounded } from '../helpers/bounded.js'
import {
  ADMIN, assertExact, buildWithUrl, isoSql, lit, rawRows, Rng, run, seedFromEnv, type Combination
} from '../helpers/exactness.js'

// Users and movies collections after SQL inserts, updates and deletes, and messages after a bulk
// COPY by another client, compared with a naive ORDER BY ... LIMIT/OFFSET and count(*).

const seed = seedFromEnv()
t.comment(`exactness seed ${seed} (replay with EXACTNESS_SEED=${seed})`)

const ROLES = ['User', 'Moderator', 'Admin', 'SuperAdmin', 'Owner'] as const
const GENRES = ['Drama', 'Crime', 'Action', 'Sci-Fi', 'Comedy'] as const
const USER_SORTS: Record<string, string> = { id: 'id', name: 'name', email: 'email', role: 'role', createdAt: 'created_at' }
const MOVIE_SORTS: Record<string, string> = { id: 'id', title: 'title', year: 'year', rating: 'rating', genre: 'genre' }

interface Filter { params: Record<string, string>, where: string }

function combos (path: string, table: string, sorts: Record<string, string>, filters: Filter[]): Combination[] {
  return filters.flatMap((f) => Object.entries(sorts).flatMap(([sort, column]) => [false, true].map((desc) => ({
    path, table, where: f.where, orderColumn: column, desc, params: { ...f.params, sort, order: desc ? 'desc' : 'asc' }
  }))))
}

function stamp (rng: Rng): string {
  return rng.chance(0.3) ? '2020-02-02T02:02:02.000Z' : new Date(rng.int(Date.parse('2015-01-01'), Date.parse('2026-01-01'))).toISOString()
}

async function insertUsers (app: App, rng: Rng, from: number, n: number): Promise<void> {
  const values = Array.from({ length: n }, (_, i) => {
    const k = from + i
    const name = rng.chance(0.15) ? null : rng.pick(['Ann', 'Bea', 'Cy', `Name ${k}`])
    const email = rng.chance(0.15) ? null : `u${k}@example.com`
    return `(${lit(`sql-user-${k}`)}, ${lit(name)}, ${lit(email)}, ${lit(rng.pick(ROLES))}, ${lit(stamp(rng))})`
  })
  await run(app, `INSERT INTO users (subject_id, name, email, role, created_at) VALUES ${values.join(', ')}`)
}

function userFilters (rng: Rng): Filter[] {
  const role = rng.pick(ROLES)
  return [{ params: {}, where: 'TRUE' }, { params: { role }, where: `role = ${lit(role)}` }, { params: { role: 'Owner' }, where: "role = 'Owner'" }]
}

/** Compares each user item with its row. */
function userItems (app: App) {
  return async (ids: number[], items: unknown[]): Promise<string | null> => {
    const rows = await rawRows<Record<string, unknown>>(app,
      `SELECT id::int AS id, subject_id, email, name, role, ${isoSql('created_at')} AS created_at, ${isoSql('updated_at')} AS updated_at
         FROM users WHERE id IN (${ids.join(', ')})`)
    const byId = new Map(rows.map((r) => [Number(r.id), r]))
    const expected = ids.map((id) => {
      const r = byId.get(id)
      return r === undefined
        ? { id, missing: true }
        : { id, subjectId: r.subject_id, email: r.email, name: r.name, role: r.role, createdAt: r.created_at, updatedAt: r.updated_at }
    })
    return JSON.stringify(items) === JSON.stringify(expected) ? null : `items differ: expected ${JSON.stringify(expected)} got ${JSON.stringify(items)}`
  }
}

t.test('users: pages and totals exact after SQL and provisioning writes', async (t) => {
  const { app } = await buildWithUrl(t)
  const rng = new Rng(seed)
  const headers = { 'x-test-user': ADMIN }
  const check = async (label: string): Promise<void> =>
    assertExact(t, app, rng, label, combos('/v2/users', 'users', USER_SORTS, userFilters(rng)), { headers, checkItems: userItems(app) })

  await app.inject({ method: 'GET', url: '/v2/users/me', headers })
  for (const sub of ['bob', 'carol', 'dave']) {
    const res = await app.inject({ method: 'GET', url: '/v2/users/me', headers: { 'x-test-user': JSON.stringify({ sub, role: 'User' }) } })
    t.equal(res.statusCode, 200, `provisioning ${sub}`)
  }
  await insertUsers(app, rng, 0, 150)
  await check('users after inserts')

  await run(app, "DELETE FROM users WHERE id IN (SELECT id FROM users WHERE subject_id LIKE 'sql-user-%' ORDER BY random() LIMIT 30)")
  await run(app, "UPDATE users SET role = 'Moderator', name = NULL WHERE id IN (SELECT id FROM users WHERE subject_id LIKE 'sql-user-%' ORDER BY random() LIMIT 20)")
  await run(app, "UPDATE users SET created_at = '2020-02-02T02:02:02Z', email = 'same@example.com' WHERE id IN (SELECT id FROM users WHERE subject_id LIKE 'sql-user-%' ORDER BY random() LIMIT 20)")
  await insertUsers(app, rng, 1000, 40)
  await check('users after deletes, updates and more inserts')
})

function movieFilters (rng: Rng): Filter[] {
  const genre = rng.pick(GENRES)
  const year = rng.pick([1994, 1999, 2014, 2021])
  const minRating = rng.pick([7.5, 8.5, 9])
  return [
    { params: {}, where: 'TRUE' },
    { params: { genre }, where: `genre = ${lit(genre)}` },
    { params: { year: String(year) }, where: `year = ${year}` },
    { params: { minRating: String(minRating) }, where: `rating >= ${minRating}` },
    { params: { genre, minRating: String(minRating) }, where: `genre = ${lit(genre)} AND rating >= ${minRating}` },
    { params: { year: '3000' }, where: 'year = 3000' }
  ]
}

async function insertMovies (app: App, rng: Rng, n: number): Promise<void> {
  const values = Array.from({ length: n }, (_, i) =>
    `(${lit(rng.chance(0.2) ? 'Remake' : `Film ${rng.int(0, 1e6)} ${i}`)}, ${rng.pick([1994, 1999, 2014, 2021, rng.int(1930, 2025)])}, ${rng.int(10, 99) / 10}, ${lit(rng.pick(GENRES))})`)
  await run(app, `INSERT INTO movies (title, year, rating, genre) VALUES ${values.join(', ')}`)
}

t.test('movies: pages and totals exact after SQL writes', async (t) => {
  const { app } = await buildWithUrl(t)
  const rng = new Rng(seed + 1)
  const check = async (label: string): Promise<void> =>
    assertExact(t, app, rng, label, combos('/v2/movies', 'movies', MOVIE_SORTS, movieFilters(rng)))

  await check('seeded movies')
  await insertMovies(app, rng, 250)
  await check('movies after inserts')
  await run(app, 'DELETE FROM movies WHERE id IN (SELECT id FROM movies ORDER BY random() LIMIT 40)')
  await run(app, "UPDATE movies SET genre = 'Drama', rating = 8.5 WHERE id IN (SELECT id FROM movies ORDER BY random() LIMIT 25)")
  await run(app, 'UPDATE movies SET year = 1994 WHERE id IN (SELECT id FROM movies ORDER BY random() LIMIT 25)')
  await insertMovies(app, rng, 30)
  await check('movies after deletes, updates and more inserts')
})

const server = process.env.TEST_DATABASE_URL
// On PostgreSQL the COPY and the DELETE come from a client of their own; PGlite, embedded, has
// no other client, so there they run through its own connection (COPY from a blob).
t.test('messages bulk-loaded with COPY, by another client on PostgreSQL', async (t) => {
  const { app, url } = await buildWithUrl(t)
  const rng = new Rng(seed + 2)
  await app.inject({ method: 'GET', url: '/v2/users/me', headers: { 'x-test-user': ADMIN } })
  const [author] = await rawRows<{ id: number }>(app, 'SELECT id::int AS id FROM users LIMIT 1')
  const all = (): Combination[] => combos('/v2/messages', 'messages', { id: 'id', createdAt: 'created_at', priority: 'priority', subject: 'subject' }, [
    { params: {}, where: 'TRUE' },
    { params: { priority: 'high' }, where: "priority = 'high'" },
    { params: { authorId: String(author!.id) }, where: `author_id = ${author!.id}` }
  ])
  // A first read, so any counter or cache exists before the other client writes.
  await assertExact(t, app, rng, 'empty before COPY', all())

  const client = server === undefined || server === '' ? undefined : postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(async () => { await client?.end() })
  const pglite = (app.db as unknown as { $client: { query: (text: string, params: unknown[], options: { blob: Blob }) => Promise<unknown> } }).$client
  const lines: string[] = []
  for (let i = 0; i < 1500; i++) {
    // Ascending, never repeated (a duplicate would fail the COPY), and spread over many buckets.
    const id = 5_000_000 + i * 30_000 + rng.int(0, 29_999)
    const subject = rng.chance(0.2) ? '\\N' : rng.pick(['alpha', 'beta', 'gamma'])
    const at = rng.chance(0.3) ? '2022-02-22T22:22:22.000Z' : new Date(rng.int(Date.parse('2012-01-01'), Date.parse('2026-01-01'))).toISOString()
    lines.push([id, `copied row ${i} lorem`, subject, rng.pick(['low', 'normal', 'high', 'urgent']), author!.id, at].join('\t'))
  }
  const data = lines.join('\n') + '\n'
  if (client === undefined) {
    await pglite.query("COPY messages (id, content, subject, priority, author_id, created_at) FROM '/dev/blob'", [], { blob: new Blob([data]) })
  } else {
    const writable = await client`COPY messages (id, content, subject, priority, author_id, created_at) FROM STDIN`.writable()
    // The driver never finishes the stream of a COPY the server refused: bounded, it fails instead.
    await bounded(new Promise<void>((resolve, reject) => {
      writable.on('error', reject)
      writable.end(data, () => resolve())
    }), 60_000)
  }
  await assertExact(t, app, rng, 'after COPY of 1500 rows', all())

  if (client === undefined) await run(app, 'DELETE FROM messages WHERE id % 3 = 0')
  else await client`DELETE FROM messages WHERE id % 3 = 0`
  await assertExact(t, app, rng, 'after a bulk DELETE by the other client', all())
})
