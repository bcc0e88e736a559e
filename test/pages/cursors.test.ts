import { sql } from 'drizzle-orm'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { build } from '../helpers/build.js'
import { queryRows } from '../helpers/fixtures.js'

// CONTRACT 12 "Cursors and links": after/before, nextCursor/prevCursor and the Link header on the
// four collections, checked against page mode and against writes made between the pages of a walk.

const ADMIN = JSON.stringify({ sub: 'root-admin', role: 'Admin' })

interface Pagination { page: number | null, limit: number, total: number, totalPages: number, nextCursor: string | null, prevCursor: string | null }
interface Reply { status: number, body: any, link: string | undefined }

async function get (app: App, url: string): Promise<Reply> {
  const res = await app.inject({ method: 'GET', url, headers: { 'x-test-user': ADMIN } })
  return { status: res.statusCode, body: res.json(), link: res.headers.link as string | undefined }
}

async function exec (app: App, text: string): Promise<void> {
  await app.db.execute(sql.raw(text))
}

const withQuery = (path: string, query: string) => query === '' ? path : `${path}${path.includes('?') ? '&' : '?'}${query}`
const ids = (body: { data: Array<{ id: number }> }) => body.data.map((item) => item.id)

/** Every item of `url` in page mode at limit 100: the reference order. */
async function reference (app: App, url: string): Promise<{ ids: number[], total: number }> {
  const all: number[] = []
  let total = 0
  for (let page = 1; ; page++) {
    const { body } = await get(app, withQuery(url, `limit=100&page=${page}`))
    total = body.pagination.total
    all.push(...ids(body))
    if (page >= body.pagination.totalPages) return { ids: all, total }
  }
}

/**
 * Walks `url` by cursor at `limit`: from page 1 along nextCursor, or from the last page back along
 * prevCursor. Checks on every page what CONTRACT 12 says of its pagination; returns the items in order.
 */
async function walk (t: Test, app: App, url: string, limit: number, direction: 'after' | 'before', total: number): Promise<number[]> {
  const totalPages = Math.ceil(total / limit)
  const start = await get(app, withQuery(url, `limit=${limit}&page=${direction === 'after' ? 1 : Math.max(totalPages, 1)}`))
  const pages: number[][] = [ids(start.body)]
  let pagination: Pagination = start.body.pagination
  for (let steps = 0; steps < 1000; steps++) {
    const cursor = direction === 'after' ? pagination.nextCursor : pagination.prevCursor
    if (cursor === null) break
    const { status, body } = await get(app, withQuery(url, `limit=${limit}&${direction}=${cursor}`))
    if (status !== 200) {
      t.fail(`${url} ${direction}: ${status} ${JSON.stringify(body)}`)
      break
    }
    pagination = body.pagination
    const { nextCursor, prevCursor, ...rest } = pagination
    if (JSON.stringify(rest) !== JSON.stringify({ page: null, limit, total, totalPages })) t.same(rest, { page: null, limit, total, totalPages }, `${url}: cursor page metadata`)
    if (typeof (direction === 'after' ? prevCursor : nextCursor) !== 'string') t.fail(`${url} ${direction}: a cursor page always has a way back`)
    if (direction === 'after') pages.push(ids(body))
    else pages.unshift(ids(body))
    if (body.data.length !== limit && (direction === 'after' ? nextCursor : prevCursor) !== null) t.fail(`${url}: a short page is the last`)
  }
  return pages.flat()
}

const NAMES = ['Ada', null, 'Ada', 'Bob', null, 'Cy', 'Bob', 'Ada', null, 'Dee', 'Eve', 'Ada']
const SUBJECTS = ['alpha', null, 'beta', 'alpha', null, 'gamma', 'beta', null, 'alpha', 'delta', null, 'alpha', 'beta']
const PRIORITIES = ['low', 'normal', 'high', 'urgent', 'normal', 'normal']

/**
 * Users with duplicate and NULL names and equal creation times; 60 messages with NULL and repeated
 * subjects, repeated priorities, and creation times that tie, or differ only in the microseconds.
 */
async function seed (app: App): Promise<void> {
  const users = NAMES.map((name, i) => `('u${i}', ${name === null ? 'NULL' : `'${name}'`}, 'u${i % 5}-${i}@example.com', '${['User', 'Admin', 'Moderator'][i % 3]}', '2025-01-01 00:00:00.${String(i % 4).padStart(6, '0')}+00')`)
  await exec(app, `INSERT INTO users (subject_id, name, email, role, created_at) VALUES ${users.join(', ')}`)
  const rows: string[] = []
  for (let i = 0; i < 60; i++) {
    const subject = SUBJECTS[i % SUBJECTS.length]!
    // Groups of three share a millisecond; within a group two share the microsecond too.
    const micros = String(Math.floor(i / 3) * 1000 + (i % 3 === 2 ? 1 : 0)).padStart(6, '0')
    const content = i % 4 === 0 ? `needle ${i}` : `hay ${i}`
    rows.push(`('${content}', ${subject === null ? 'NULL' : `'${subject}'`}, '${PRIORITIES[i % PRIORITIES.length]}', (SELECT id FROM users WHERE subject_id = 'u${i % 4}'), '2025-02-01 00:00:00.${micros}+00')`)
  }
  // Inserted out of time order, so id order and time order differ.
  rows.reverse()
  await exec(app, `INSERT INTO messages (content, subject, priority, author_id, created_at) VALUES ${rows.join(', ')}`)
}

// Two databases for the whole file: one only read, one written to (each of its tests seeds it afresh).
type Check = [string, (t: Test, app: App) => Promise<void>]
const tests: Check[] = []
const writing: Check[] = []

const COLLECTIONS: Array<{ path: string, sorts: string[], filters: string[] }> = [
  { path: '/v2/messages', sorts: ['id', 'createdAt', 'priority', 'subject'], filters: ['', 'priority=normal', 'subject=alpha'] },
  { path: '/v2/messages/search?q=needle', sorts: ['id', 'createdAt', 'priority', 'subject'], filters: ['', 'priority=normal'] },
  { path: '/v2/users', sorts: ['id', 'name', 'email', 'role', 'createdAt'], filters: ['', 'role=User'] },
  { path: '/v2/movies', sorts: ['id', 'title', 'year', 'rating', 'genre'], filters: ['', 'genre=Drama'] }
]

tests.push(['walking by after and by before gives the order of page mode, for every sort, order and filter', async (t, app) => {
  for (const { path, sorts, filters } of COLLECTIONS) {
    for (const sort of sorts) {
      for (const order of ['asc', 'desc']) {
        for (const filter of filters) {
          const url = withQuery(path, [filter, `sort=${sort}`, `order=${order}`].filter((part) => part !== '').join('&'))
          const expected = await reference(app, url)
          for (const limit of [3, 8]) {
            t.same(await walk(t, app, url, limit, 'after', expected.total), expected.ids, `${url} limit ${limit} by after`)
            t.same(await walk(t, app, url, limit, 'before', expected.total), expected.ids, `${url} limit ${limit} by before`)
          }
        }
      }
    }
  }
}])

tests.push(['the reference order is the database order: NULLs last ascending, first descending, ties by id', async (t, app) => {
  for (const [sort, column] of [['subject', 'subject'], ['createdAt', 'created_at'], ['priority', 'priority']]) {
    for (const order of ['asc', 'desc']) {
      const rows = await queryRows<{ id: number }>(app.db, sql.raw(`SELECT id::float8 AS id FROM messages ORDER BY ${column} ${order}, id`))
      const url = `/v2/messages?sort=${sort}&order=${order}`
      t.same(await walk(t, app, url, 5, 'after', rows.length), rows.map((row) => row.id), `${url} by after equals ORDER BY ${column} ${order}, id`)
    }
  }
}])

writing.push(['a walk under concurrent inserts and deletes never repeats an item and skips none that existed throughout', async (t, app) => {
  const author = JSON.stringify({ sub: 'u0', role: 'User' })
  const moderator = JSON.stringify({ sub: 'u1', role: 'Moderator' })
  for (const [sort, order] of [['createdAt', 'desc'], ['subject', 'asc'], ['subject', 'desc'], ['priority', 'desc'], ['id', 'asc']]) {
    const url = `/v2/messages?sort=${sort}&order=${order}`
    for (const direction of ['after', 'before'] as const) {
      const before = (await reference(app, url)).ids
      const deleted = new Set<number>()
      const seen: number[] = []
      let { body } = await get(app, withQuery(url, `limit=4&page=${direction === 'after' ? 1 : Math.ceil(before.length / 4)}`))
      for (let step = 0; step < 200; step++) {
        seen.push(...ids(body))
        const cursor = direction === 'after' ? body.pagination.nextCursor : body.pagination.prevCursor
        if (cursor === null) break
        // Writes between pages, on both sides of the cursor: SQL inserts with old and new times and
        // NULL subjects, an insert through the API, deletes through SQL and through the API.
        await exec(app, `INSERT INTO messages (content, subject, priority, author_id, created_at) VALUES
          ('new ${step}a', NULL, 'urgent', (SELECT id FROM users WHERE subject_id = 'u0'), '2025-02-01 00:00:00.000500+00'),
          ('new ${step}b', 'beta', 'low', (SELECT id FROM users WHERE subject_id = 'u0'), now())`)
        const created = await app.inject({ method: 'POST', url: '/v2/messages', headers: { 'x-test-user': author }, payload: { content: `api ${step}`, subject: 'alpha' } })
        t.equal(created.statusCode, 201)
        const victims = before.filter((id) => !deleted.has(id))
        const bySql = victims[(step * 7) % victims.length]!
        const byApi = victims[(step * 11 + 3) % victims.length]!
        deleted.add(bySql).add(byApi)
        await exec(app, `DELETE FROM messages WHERE id = ${bySql}`)
        await app.inject({ method: 'DELETE', url: `/v2/messages/${byApi}`, headers: { 'x-test-user': moderator } })
        const next = await get(app, withQuery(url, `limit=4&${direction}=${cursor}`))
        t.equal(next.status, 200)
        body = next.body
      }
      t.equal(new Set(seen).size, seen.length, `${url} by ${direction}: no item repeats`)
      const missing = before.filter((id) => !deleted.has(id) && !seen.includes(id))
      t.same(missing, [], `${url} by ${direction}: every item that existed throughout was seen`)
    }
  }
}])

writing.push(['a cursor stays valid after its own item is deleted', async (t, app) => {
  for (const url of ['/v2/messages?sort=createdAt&order=desc', '/v2/messages?sort=subject', '/v2/messages?sort=subject&order=desc', '/v2/users?sort=name', '/v2/messages']) {
    const all = (await reference(app, url)).ids
    const { body } = await get(app, withQuery(url, 'limit=5&page=2'))
    t.same(ids(body), all.slice(5, 10))
    const { nextCursor, prevCursor } = body.pagination as Pagination
    const table = url.startsWith('/v2/users') ? 'users' : 'messages'
    // Users own messages: a user's messages go with it, so only message-free users are deleted.
    if (table === 'users') await exec(app, `DELETE FROM messages WHERE author_id IN (${all[9]}, ${all[5]})`)
    await exec(app, `DELETE FROM ${table} WHERE id IN (${all[9]}, ${all[5]})`)
    const after = await get(app, withQuery(url, `limit=5&after=${nextCursor}`))
    const expectedAfter = (await reference(app, url)).ids
    t.same({ status: after.status, data: ids(after.body) }, { status: 200, data: expectedAfter.slice(8, 13) }, `${url}: after the deleted item's cursor, the items that followed it`)
    const before = await get(app, withQuery(url, `limit=5&before=${prevCursor}`))
    t.same({ status: before.status, data: ids(before.body) }, { status: 200, data: expectedAfter.slice(0, 5) }, `${url}: before the deleted item's cursor, the items that preceded it`)
    await reseed(app)
  }
}])

writing.push(['pagination in cursor mode: page null, exact totals, cursors null exactly at the ends', async (t, app) => {
  const url = '/v2/messages?sort=subject&order=desc'
  const all = (await reference(app, url)).ids
  const first = await get(app, withQuery(url, 'limit=25'))
  t.same({ ...first.body.pagination, nextCursor: typeof first.body.pagination.nextCursor },
    { page: 1, limit: 25, total: 60, totalPages: 3, nextCursor: 'string', prevCursor: null }, 'page 1: no prevCursor, a nextCursor')
  const second = await get(app, withQuery(url, `limit=25&after=${first.body.pagination.nextCursor}&page=7`))
  t.same({ ...second.body.pagination, nextCursor: typeof second.body.pagination.nextCursor, prevCursor: typeof second.body.pagination.prevCursor },
    { page: null, limit: 25, total: 60, totalPages: 3, nextCursor: 'string', prevCursor: 'string' }, 'by cursor, page is ignored and null')
  t.same(ids(second.body), all.slice(25, 50))
  const third = await get(app, withQuery(url, `limit=25&after=${second.body.pagination.nextCursor}`))
  t.same(ids(third.body), all.slice(50))
  t.equal(third.body.pagination.nextCursor, null, 'the last page has no nextCursor')
  const lastPage = await get(app, withQuery(url, 'limit=25&page=3'))
  t.same({ next: lastPage.body.pagination.nextCursor, prev: typeof lastPage.body.pagination.prevCursor }, { next: null, prev: 'string' }, 'page mode: the last page has no nextCursor')
  // Exactly limit items left: nextCursor is still null (the read takes one more than the page).
  const exact = await get(app, withQuery(url, `limit=10&after=${(await get(app, withQuery(url, 'limit=50'))).body.pagination.nextCursor}`))
  t.same({ data: ids(exact.body), next: exact.body.pagination.nextCursor }, { data: all.slice(50), next: null }, 'a page that ends exactly at the end has no nextCursor')
  const start = await get(app, withQuery(url, `limit=25&before=${second.body.pagination.prevCursor}`))
  t.same({ data: ids(start.body), prev: start.body.pagination.prevCursor, next: start.body.pagination.nextCursor }, { data: all.slice(0, 25), prev: null, next: first.body.pagination.nextCursor },
    'back at the start by before: no prevCursor, and the nextCursor of page 1')
  const end = await get(app, withQuery(url, 'limit=60'))
  t.equal(end.body.pagination.nextCursor, null, 'one page holding everything: no nextCursor')
  t.equal(end.body.pagination.prevCursor, null, 'and no prevCursor')
  // Delete the tail: after the old last item, an empty page; its prevCursor answers the items before.
  const tail = await get(app, withQuery(url, 'limit=5&page=11'))
  t.same(ids(tail.body), all.slice(50, 55))
  await exec(app, `DELETE FROM messages WHERE id IN (${all.slice(55).join(',')})`)
  const afterTail = await get(app, withQuery(url, `limit=5&after=${tail.body.pagination.nextCursor}`))
  t.same({ data: afterTail.body.data, total: afterTail.body.pagination.total, next: afterTail.body.pagination.nextCursor, prev: typeof afterTail.body.pagination.prevCursor },
    { data: [], total: 55, next: null, prev: 'string' }, 'nothing follows: empty data, total 55, no nextCursor, a prevCursor')
  const back = await get(app, withQuery(url, `limit=5&before=${afterTail.body.pagination.prevCursor}`))
  t.same(ids(back.body), all.slice(50, 55), 'the empty page leads back to the items before its cursor')
  // A filter that matches nothing.
  const nothing = await get(app, '/v2/movies?year=3000')
  t.same(nothing.body, { data: [], pagination: { page: 1, limit: 25, total: 0, totalPages: 0, nextCursor: null, prevCursor: null } })
}])

tests.push(['400 Invalid cursor: malformed, both directions, another collection, sort, order, filter or term', async (t, app) => {
  const cursorOf = async (url: string) => (await get(app, withQuery(url, 'limit=2'))).body.pagination.nextCursor as string
  const messages = await cursorOf('/v2/messages?sort=createdAt&order=desc&priority=normal')
  const search = await cursorOf('/v2/messages/search?q=needle')
  const users = await cursorOf('/v2/users?sort=name')
  const forge = (fields: unknown[]) => Buffer.from(JSON.stringify(fields)).toString('base64url')
  const cases: Array<[string, string]> = [
    ['not base64url', '/v2/messages?after=%25%25%25'],
    ['base64url of no JSON', `/v2/messages?after=${Buffer.from('nope').toString('base64url')}`],
    ['JSON of the wrong shape', `/v2/messages?after=${forge(['messages', 'id', 'asc', ''])}`],
    ['an id that is no integer', `/v2/messages?after=${forge(['messages', 'id', 'asc', '', null, 1.5])}`],
    ['a key the sort cannot hold', `/v2/messages?sort=createdAt&after=${forge(['messages', 'createdAt', 'asc', '', 'yesterday', 3])}`],
    ['a priority that does not exist', `/v2/messages?sort=priority&order=desc&priority=low&after=${forge(['messages', 'priority', 'desc', 'x', 'extreme', 3])}`],
    ['a key on sort=id', `/v2/messages?after=${forge(['messages', 'id', 'asc', '', '5', 3])}`],
    ['both after and before', `/v2/messages?sort=createdAt&order=desc&priority=normal&after=${messages}&before=${messages}`],
    ['another collection', `/v2/users?sort=createdAt&order=desc&priority=normal&after=${messages}`],
    ['another collection (movies)', `/v2/movies?sort=name&before=${users}`],
    ['another sort', `/v2/messages?sort=id&order=desc&priority=normal&after=${messages}`],
    ['another order', `/v2/messages?sort=createdAt&priority=normal&after=${messages}`],
    ['another filter value', `/v2/messages?sort=createdAt&order=desc&priority=high&after=${messages}`],
    ['a filter left out', `/v2/messages?sort=createdAt&order=desc&before=${messages}`],
    ['another search term', `/v2/messages/search?q=hay&after=${search}`],
    ['a search cursor on the list', `/v2/messages?after=${search}`],
    ['a list cursor on search', `/v2/messages/search?q=needle&sort=createdAt&order=desc&priority=normal&after=${messages}`]
  ]
  for (const [name, url] of cases) {
    const { status, body } = await get(app, url)
    t.same({ status, body }, { status: 400, body: { error: 'Invalid cursor' } }, name)
  }
  const ok = await get(app, `/v2/messages?priority=normal&order=desc&sort=createdAt&limit=9&after=${messages}`)
  t.equal(ok.status, 200, 'the same query in another parameter order and with another limit accepts it')
  t.equal((await get(app, '/v2/messages?after=&before=')).status, 200, 'empty after and before are absent')
}])

// CONTRACT 16: a forged cursor is well-formed JSON of the right shape whose key or id PostgreSQL
// cannot take; each is `Invalid cursor` before any statement runs, never `Failed to retrieve`.
const SORT_KEYS: Record<string, 'id' | 'text' | 'timestamptz' | 'enum' | 'integer' | 'numeric'> = Object.fromEntries([
  ['id', 'id'], ['createdAt', 'timestamptz'], ['priority', 'enum'], ['subject', 'text'], ['name', 'text'], ['email', 'text'], ['role', 'text'],
  ['title', 'text'], ['year', 'integer'], ['rating', 'numeric'], ['genre', 'text']
])
const HOSTILE_KEYS: Record<string, unknown[]> = {
  // On sort=id the key is null; the id is what reaches the database.
  id: [],
  text: ['a\u0000b', '\u0000', 'y\ud800', '\udfff', 'a\ude00\ud83d', 7, true, {}],
  // Before 4714-11-24 BC, past what an interval can carry, past bigint, and no integer at all.
  timestamptz: ['-210866803200000001', '9223372036854774785', '9223372036854775807', '-9223372036854775808', '99999999999999999999', '1e3', '1.5', 'NaN', '\u0000'],
  enum: ['extreme', 'low\u0000', 'Low', ''],
  integer: ['2147483648', '-2147483649', '99999999999', '1.5', '1e3', 'NaN'],
  numeric: ['1e400', 'NaN', 'Infinity', '1'.repeat(31), '0x10', '']
}
// Keys at the very ends of what the database takes are positions like any other.
const EDGE_KEYS: Record<string, string[]> = {
  text: ['🌧 \ud83d\ude00', ''],
  timestamptz: ['-210866803200000000', '9223372036854774784'],
  enum: ['urgent'],
  integer: ['2147483647', '-2147483647'],
  numeric: ['-' + '9'.repeat(30) + '.' + '9'.repeat(30)]
}

tests.push(['400 Invalid cursor: a key or id PostgreSQL cannot take, on every collection, sort, order and direction', async (t, app) => {
  const encode = (text: string) => Buffer.from(text).toString('base64url')
  for (const { path, sorts } of COLLECTIONS) {
    for (const sort of sorts) {
      for (const order of ['asc', 'desc']) {
        const url = withQuery(path, `sort=${sort}&order=${order}`)
        const issued = (await get(app, withQuery(url, 'limit=1'))).body.pagination.nextCursor as string
        const [collection, sortField, orderField, filters, key, id] = JSON.parse(Buffer.from(issued, 'base64url').toString()) as unknown[]
        const forge = (k: unknown, i: unknown) => encode(JSON.stringify([collection, sortField, orderField, filters, k, i]))
        const type = SORT_KEYS[sort]!
        const forged: Array<[string, string]> = [
          ...(HOSTILE_KEYS[type] ?? []).map((k): [string, string] => [`key ${JSON.stringify(k)}`, forge(k, id)]),
          ...[2 ** 53, -(2 ** 53), 1.5, '1', null].map((i): [string, string] => [`id ${JSON.stringify(i)}`, forge(key, i)]),
          // Numbers JSON can write but no JavaScript number holds.
          ['id 1e400', encode(`${JSON.stringify([collection, sortField, orderField, filters, key]).slice(0, -1)},1e400]`)],
          ['id -1e400', encode(`${JSON.stringify([collection, sortField, orderField, filters, key]).slice(0, -1)},-1e400]`)]
        ]
        for (const direction of ['after', 'before']) {
          for (const [name, cursor] of forged) {
            const { status, body } = await get(app, withQuery(url, `${direction}=${cursor}`))
            if (status !== 400 || body.error !== 'Invalid cursor') t.same({ status, body }, { status: 400, body: { error: 'Invalid cursor' } }, `${url} ${direction}: ${name}`)
          }
          for (const k of type === 'id' ? [null] : EDGE_KEYS[type]!) {
            for (const i of [Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER]) {
              const { status } = await get(app, withQuery(url, `${direction}=${forge(k, i)}`))
              if (status !== 200) t.equal(status, 200, `${url} ${direction}: the edge key ${JSON.stringify(k)} with id ${i}`)
            }
          }
        }
        t.pass(`${url}: ${forged.length} forged cursors refused both ways, edge keys taken`)
      }
    }
  }
}])

tests.push(['Link headers: page mode by page number', async (t, app) => {
  const links = async (url: string) => (await get(app, url)).link
  t.equal(await links('/v2/movies?limit=20&sort=title&page=2'),
    '</v2/movies?limit=20&sort=title&page=1>; rel="first", </v2/movies?limit=20&sort=title&page=1>; rel="prev", ' +
    '</v2/movies?limit=20&sort=title&page=3>; rel="next", </v2/movies?limit=20&sort=title&page=3>; rel="last"', 'a middle page: all four')
  t.equal(await links('/v2/movies?limit=20'),
    '</v2/movies?limit=20&page=1>; rel="first", </v2/movies?limit=20&page=2>; rel="next", </v2/movies?limit=20&page=3>; rel="last"', 'page 1: no prev')
  t.equal(await links('/v2/movies?page=3&limit=20&genre=Sci-Fi'),
    '</v2/movies?limit=20&genre=Sci-Fi&page=1>; rel="first", </v2/movies?limit=20&genre=Sci-Fi&page=1>; rel="prev", </v2/movies?limit=20&genre=Sci-Fi&page=1>; rel="last"',
    'page 3 past the one page: prev leads to the last page')
  t.equal(await links('/v2/movies?page=3&limit=20'),
    '</v2/movies?limit=20&page=1>; rel="first", </v2/movies?limit=20&page=2>; rel="prev", </v2/movies?limit=20&page=3>; rel="last"', 'the last page: no next')
  t.equal(await links('/v2/movies?page=9&limit=20'),
    '</v2/movies?limit=20&page=1>; rel="first", </v2/movies?limit=20&page=3>; rel="prev", </v2/movies?limit=20&page=3>; rel="last"', 'past the end: prev is the last page')
  t.equal(await links('/v2/movies?year=3000'),
    '</v2/movies?year=3000&page=1>; rel="first", </v2/movies?year=3000&page=1>; rel="last"', 'nothing matches: first and last are page 1')
  t.equal(await links('/v2/movies'), '</v2/movies?page=1>; rel="first", </v2/movies?page=2>; rel="next", </v2/movies?page=3>; rel="last"', 'no query at all')
  t.equal(await links('/v2/messages/search?q=a%20b&page=1'),
    '</v2/messages/search?q=a%20b&page=1>; rel="first", </v2/messages/search?q=a%20b&page=1>; rel="last"', 'parameters are kept as they were sent')
  t.equal(await links('/v2/users?role=User'), '</v2/users?role=User&page=1>; rel="first", </v2/users?role=User&page=1>; rel="last"', 'on users too')
  t.equal(await links('/v2/messages?limit=5&page=2'),
    '</v2/messages?limit=5&page=1>; rel="first", </v2/messages?limit=5&page=1>; rel="prev", </v2/messages?limit=5&page=3>; rel="next", </v2/messages?limit=5&page=12>; rel="last"',
    'on messages too')
}])

tests.push(['Link headers: cursor mode by cursor', async (t, app) => {
  const page1 = await get(app, '/v2/movies?limit=20&sort=rating&order=desc')
  const middle = await get(app, `/v2/movies?limit=20&after=${page1.body.pagination.nextCursor}&sort=rating&order=desc`)
  const { nextCursor, prevCursor } = middle.body.pagination as Pagination
  t.equal(middle.link,
    '</v2/movies?limit=20&sort=rating&order=desc>; rel="first", ' +
    `</v2/movies?limit=20&sort=rating&order=desc&before=${prevCursor}>; rel="prev", ` +
    `</v2/movies?limit=20&sort=rating&order=desc&after=${nextCursor}>; rel="next"`, 'a middle page: first, prev and next')
  const last = await get(app, `/v2/movies?limit=20&sort=rating&order=desc&after=${nextCursor}&page=2`)
  t.equal(last.link,
    '</v2/movies?limit=20&sort=rating&order=desc>; rel="first", ' +
    `</v2/movies?limit=20&sort=rating&order=desc&before=${last.body.pagination.prevCursor}>; rel="prev"`, 'the last page: no next, and page is dropped')
  const back = await get(app, `/v2/movies?limit=20&sort=rating&order=desc&before=${middle.body.pagination.prevCursor}`)
  t.same({ ...back.body, pagination: { ...back.body.pagination, page: 1 } }, page1.body, 'before the middle page: the first page again, with the same cursors')
  t.equal(back.link,
    '</v2/movies?limit=20&sort=rating&order=desc>; rel="first", ' +
    `</v2/movies?limit=20&sort=rating&order=desc&after=${page1.body.pagination.nextCursor}>; rel="next"`, 'the first page by cursor: no prev')
  // Following every link of the walk returns to where it started.
  const followed = await get(app, /<([^>]+)>; rel="next"/.exec(middle.link!)![1]!)
  t.same(ids(followed.body), ids(last.body))
}])

async function reseed (app: App): Promise<void> {
  await exec(app, 'DELETE FROM messages')
  await exec(app, 'DELETE FROM users')
  await seed(app)
}

t.test('on a database only read', async (t) => {
  const app = await build(t, { testAuth: true })
  await seed(app)
  for (const [name, check] of tests) await t.test(name, (t) => check(t, app))
})

t.test('on a database written to', async (t) => {
  const app = await build(t, { testAuth: true })
  for (const [name, check] of writing) {
    await reseed(app)
    await t.test(name, (t) => check(t, app))
  }
})
