import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import type { Message, Priority } from '../../src/schemas/messages.js'
import { build } from '../helpers/build.js'
import { createAuthor, createMessages, queryRows } from '../helpers/fixtures.js'
import { cursorKinds, pageBody, pagination } from '../helpers/pagination.js'

interface Movie { id: number, title: string, year: number, rating: number, genre: string }

// drizzle/0001_seed_movies.sql, in insertion order: ids 1..54 on a fresh database.
const SEED: Array<[string, number, number, string]> = [
  ['The Shawshank Redemption', 1994, 9.3, 'Drama'],
  ['The Godfather', 1972, 9.2, 'Crime'],
  ['The Dark Knight', 2008, 9.0, 'Action'],
  ['The Godfather Part II', 1974, 9.0, 'Crime'],
  ['12 Angry Men', 1957, 9.0, 'Drama'],
  ["Schindler's List", 1993, 9.0, 'Drama'],
  ['The Lord of the Rings: The Return of the King', 2003, 9.0, 'Fantasy'],
  ['Pulp Fiction', 1994, 8.9, 'Crime'],
  ['The Good, the Bad and the Ugly', 1966, 8.8, 'Western'],
  ['Fight Club', 1999, 8.8, 'Drama'],
  ['Forrest Gump', 1994, 8.8, 'Drama'],
  ['Inception', 2010, 8.8, 'Sci-Fi'],
  ['The Matrix', 1999, 8.7, 'Sci-Fi'],
  ['Goodfellas', 1990, 8.7, 'Crime'],
  ['Interstellar', 2014, 8.7, 'Sci-Fi'],
  ['Seven Samurai', 1954, 8.6, 'Action'],
  ['Spirited Away', 2001, 8.6, 'Animation'],
  ['Parasite', 2019, 8.5, 'Thriller'],
  ['The Silence of the Lambs', 1991, 8.6, 'Thriller'],
  ['Saving Private Ryan', 1998, 8.6, 'War'],
  ['City of God', 2002, 8.6, 'Crime'],
  ['Life Is Beautiful', 1997, 8.6, 'Comedy'],
  ['The Green Mile', 1999, 8.6, 'Drama'],
  ['Star Wars', 1977, 8.6, 'Sci-Fi'],
  ['Terminator 2: Judgment Day', 1991, 8.6, 'Action'],
  ['Back to the Future', 1985, 8.5, 'Sci-Fi'],
  ['Psycho', 1960, 8.5, 'Horror'],
  ['The Lion King', 1994, 8.5, 'Animation'],
  ['Gladiator', 2000, 8.5, 'Action'],
  ['The Departed', 2006, 8.5, 'Crime'],
  ['Whiplash', 2014, 8.5, 'Drama'],
  ['Alien', 1979, 8.5, 'Horror'],
  ['Casablanca', 1942, 8.5, 'Romance'],
  ['Modern Times', 1936, 8.5, 'Comedy'],
  ['Rear Window', 1954, 8.5, 'Thriller'],
  ['Apocalypse Now', 1979, 8.4, 'War'],
  ['WALL-E', 2008, 8.4, 'Animation'],
  ['The Shining', 1980, 8.4, 'Horror'],
  ['Amadeus', 1984, 8.4, 'Drama'],
  ['Toy Story', 1995, 8.3, 'Animation'],
  ['Good Will Hunting', 1997, 8.3, 'Drama'],
  ['Amelie', 2001, 8.3, 'Romance'],
  ["Singin' in the Rain", 1952, 8.3, 'Musical'],
  ['Up', 2009, 8.3, 'Animation'],
  ['Mad Max: Fury Road', 2015, 8.1, 'Action'],
  ['Jaws', 1975, 8.1, 'Thriller'],
  ['The Grand Budapest Hotel', 2014, 8.1, 'Comedy'],
  ['Arrival', 2016, 7.9, 'Sci-Fi'],
  ['La La Land', 2016, 8.0, 'Musical'],
  ['Get Out', 2017, 7.8, 'Horror'],
  ['Groundhog Day', 1993, 8.0, 'Comedy'],
  ['Notting Hill', 1999, 7.2, 'Romance'],
  ['The Notebook', 2004, 7.8, 'Romance'],
  ['Home Alone', 1990, 7.7, 'Comedy']
]
const MOVIES: Movie[] = SEED.map(([title, year, rating, genre], i) => ({ id: i + 1, title, year, rating, genre }))
const movie = (id: number): Movie => MOVIES[id - 1]!
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i)
const DRAMAS = [1, 5, 6, 10, 11, 23, 31, 39, 41]

const PRIORITY_RANK: Record<Priority, number> = { low: 0, normal: 1, high: 2, urgent: 3 }

interface Reply { status: number, body: any, raw: string }

async function get (app: App, url: string): Promise<Reply> {
  const res = await app.inject({ method: 'GET', url })
  return { status: res.statusCode, body: cursorKinds(res.json()), raw: res.body }
}

/** Every page of `url` at `limit`, checking each page's metadata on the way; returns the items in page order. */
async function allPages (t: Test, app: App, url: string, limit: number, total: number): Promise<Array<{ id: number }>> {
  const items: Array<{ id: number }> = []
  const totalPages = Math.ceil(total / limit)
  const sep = url.includes('?') ? '&' : '?'
  for (let page = 1; page <= totalPages; page++) {
    const { status, body } = await get(app, `${url}${sep}page=${page}&limit=${limit}`)
    t.equal(status, 200, `page ${page}: 200`)
    t.same(body.pagination, pagination(page, limit, total, body.data.length), `page ${page}: total and totalPages do not change`)
    items.push(...body.data)
  }
  return items
}

/**
 * SPEC 4.9 + CONTRACT 10 on the pagination parameters, against a collection whose every item, in
 * id order, is `all`. Each conversion rule is its own assertion on the status and the whole body.
 */
async function checkPaginationParameters<T> (t: Test, app: App, path: string, all: T[]): Promise<void> {
  const total = all.length
  const lastPage = Math.ceil(total / 25)
  const cases: Array<[string, string, number, number, T[]]> = [
    ['no parameters: page 1, limit 25', '', 1, 25, all.slice(0, 25)],
    ['page=0 gives page 1', 'page=0', 1, 25, all.slice(0, 25)],
    ['page=-1 gives page 1', 'page=-1', 1, 25, all.slice(0, 25)],
    ['page=abc gives page 1', 'page=abc', 1, 25, all.slice(0, 25)],
    ['page= (empty) gives page 1', 'page=', 1, 25, all.slice(0, 25)],
    ['page=Infinity gives page 1', 'page=Infinity', 1, 25, all.slice(0, 25)],
    ['page=2.5 is truncated to 2', 'page=2.5', 2, 25, all.slice(25, 50)],
    ['limit=0 gives 1', 'limit=0', 1, 1, all.slice(0, 1)],
    ['limit=-1 gives 1', 'limit=-1', 1, 1, all.slice(0, 1)],
    ['limit=abc gives 25', 'limit=abc', 1, 25, all.slice(0, 25)],
    ['limit= (empty, i.e. missing) gives 25', 'limit=', 1, 25, all.slice(0, 25)],
    ['limit=1000 is clamped to 100', 'limit=1000', 1, 100, all.slice(0, 100)],
    ['limit=2.5 is truncated to 2', 'limit=2.5', 1, 2, all.slice(0, 2)],
    ['a repeated key uses its first value (limit=2&limit=5)', 'limit=2&limit=5', 1, 2, all.slice(0, 2)],
    ['a repeated page uses its first value (page=2&page=1)', 'page=2&page=1&limit=10', 2, 10, all.slice(10, 20)],
    ['page and limit together: offset (page - 1) * limit', 'page=3&limit=7', 3, 7, all.slice(14, 21)],
    ['a page beyond the last: 200, empty data, same total and totalPages', `page=${lastPage + 1}`, lastPage + 1, 25, []],
    ['a huge page (1e300): 200, empty data, valid metadata', 'page=1e300', 1e300, 25, []],
    ['a huge page (99999999999999999999): 200, empty data, valid metadata', 'page=99999999999999999999', 1e20, 25, []]
  ]
  for (const [name, query, page, limit, data] of cases) {
    const { status, body } = await get(app, query === '' ? path : `${path}?${query}`)
    t.same({ status, body }, { status: 200, body: pageBody(data, page, limit, total) }, name)
  }
}

t.test('GET /v2/movies: the reference collection of SPEC 4.9', async (t) => {
  const app = await build(t)
  const byId = MOVIES.slice()

  await checkPaginationParameters(t, app, '/v2/movies', byId)

  {
    const { body } = await get(app, '/v2/movies')
    t.same(Object.keys(body).sort(), ['data', 'pagination'], 'only data and pagination at the top level')
    t.same(Object.keys(body.data[0]).sort(), ['genre', 'id', 'rating', 'title', 'year'], 'a movie is { id, title, year, rating, genre }')
  }

  t.test('sorting', async (t) => {
    const byRatingAsc = byId.slice().sort((a, b) => a.rating - b.rating)
    const byRatingDesc = byId.slice().sort((a, b) => b.rating - a.rating)
    const byYearDesc = byId.slice().sort((a, b) => b.year - a.year)
    const cases: Array<[string, string, Movie[]]> = [
      ['sort=rating ascending, ties by id ascending', 'sort=rating', byRatingAsc],
      ['sort=rating&order=desc, ties still by id ascending', 'sort=rating&order=desc', byRatingDesc],
      ['sort=year&order=desc', 'sort=year&order=desc', byYearDesc],
      ['order=desc on the default sort: id descending', 'order=desc', byId.slice().reverse()],
      ['order=DESC is not desc: ascending', 'order=DESC', byId],
      ['order=anything: ascending', 'order=anything', byId],
      ['a field outside the allowlist falls back to id', 'sort=bogus', byId],
      ['a field outside the allowlist falls back to id, order still applies', 'sort=bogus&order=desc', byId.slice().reverse()],
      ['an injection attempt in sort is just an unknown field', 'sort=rating%3Bdrop%20table%20movies', byId]
    ]
    for (const [name, query, expected] of cases) {
      const { status, body } = await get(app, `/v2/movies?${query}&limit=100`)
      t.same({ status, body }, { status: 200, body: pageBody(expected, 1, 100, 54) }, name)
    }
    // Only the first titles: where they fall is the same under every collation.
    const { status, body } = await get(app, '/v2/movies?sort=title&limit=3')
    t.same({ status, body }, { status: 200, body: pageBody([movie(5), movie(32), movie(39)], 1, 3, 54) },
      'sort=title ascending: 12 Angry Men, Alien, Amadeus')

    const walked = await allPages(t, app, '/v2/movies?sort=rating', 4, 54)
    t.same(walked.map((m) => m.id), byRatingAsc.map((m) => m.id),
      'sorted by a column with many ties, the pages concatenate to every id exactly once, in order')
  })

  t.test('filters', async (t) => {
    const cases: Array<[string, string, Movie[]]> = [
      ['year=1994 is converted to a number: every 1994 movie', 'year=1994', [1, 8, 11, 28].map(movie)],
      ['genre=Drama', 'genre=Drama', DRAMAS.map(movie)],
      ['minRating=9 is >=: the five movies rated exactly 9.0 are included', 'minRating=9', [1, 2, 3, 4, 5, 6, 7].map(movie)],
      ['minRating=8.5 includes the movies rated exactly 8.5 (Parasite, id 18, among them)', 'minRating=8.5', range(1, 35).map(movie)],
      ['genre + year + minRating combine', 'genre=Drama&year=1994&minRating=8.9', [movie(1)]],
      ['genre + year combine', 'genre=Drama&year=1994', [movie(1), movie(11)]],
      ['genre + minRating combine', 'genre=Drama&minRating=8.9', [movie(1), movie(5), movie(6)]],
      ['filters combine with sort and order', 'year=1994&sort=rating&order=desc', [movie(1), movie(8), movie(11), movie(28)]]
    ]
    for (const [name, query, expected] of cases) {
      const { status, body } = await get(app, `/v2/movies?${query}&limit=100`)
      t.same({ status, body }, { status: 200, body: pageBody(expected, 1, 100, expected.length) }, name)
    }

    {
      const { status, body } = await get(app, '/v2/movies?genre=Drama&limit=3&page=2')
      t.same({ status, body }, { status: 200, body: pageBody(DRAMAS.slice(3, 6).map(movie), 2, 3, 9) },
        'total counts the filtered items, not the whole table')
    }
    {
      const { status, body } = await get(app, '/v2/movies?genre=Documentary')
      t.same({ status, body }, { status: 200, body: pageBody([], 1, 25, 0) },
        'a filter matching nothing: 200, data [], total 0, totalPages 0')
    }
    {
      const { status, body } = await get(app, '/v2/movies?year=1994&minRating=9.5&page=3')
      t.same({ status, body }, { status: 200, body: pageBody([], 3, 25, 0) },
        'combined filters matching nothing, on a later page: still 200 with total 0')
    }
    {
      const { status, body } = await get(app, '/v2/movies?year=abc')
      t.same({ status, body }, { status: 400, body: { error: 'Validation failed', details: ['year must be a number'] } },
        'a non-numeric numeric filter: 400, never a silent fallback')
    }
    {
      const { status, body } = await get(app, '/v2/movies?minRating=high')
      t.same({ status, body }, { status: 400, body: { error: 'Validation failed', details: ['minRating must be a number'] } },
        'minRating=high: 400')
    }
  })
})

t.test('GET /v2/messages: the message collection of CONTRACT 6/7', async (t) => {
  const app = await build(t)

  {
    const { status, body } = await get(app, '/v2/messages')
    t.same({ status, body }, { status: 200, body: pageBody([], 1, 25, 0) },
      'an empty collection: 200, data [], total 0, totalPages 0')
  }

  const alice = await createAuthor(app, 'alice')
  const bob = await createAuthor(app, 'bob')
  const carol = await createAuthor(app, 'carol', { name: null })
  // Many equal priorities and subjects, so sorting by them leans on the id tie-breaker.
  const pattern: Priority[] = ['normal', 'high', 'normal', 'low', 'urgent', 'normal', 'high']
  const over = (offset: number) => (i: number) => ({
    priority: pattern[(i + offset) % pattern.length]!,
    subject: [null, 'weekly', 'daily'][(i + offset) % 3]!,
    content: `message ${i + offset + 1}`
  })
  const all: Message[] = [
    ...await createMessages(app, alice.id, 16, over(0)),
    ...await createMessages(app, bob.id, 12, over(16)),
    ...await createMessages(app, carol.id, 2, over(28))
  ]
  t.equal(all.length, 30)

  await checkPaginationParameters(t, app, '/v2/messages', all)

  t.test('item and body shape', async (t) => {
    const { status, body } = await get(app, '/v2/messages?limit=1')
    t.equal(status, 200)
    t.same(Object.keys(body).sort(), ['data', 'pagination'], 'only data and pagination at the top level')
    t.same(Object.keys(body.data[0]), ['id', 'content', 'subject', 'priority', 'author', 'createdAt'],
      'a message is exactly { id, content, subject, priority, author, createdAt }')
    t.same(body.data[0].author, { id: alice.id, name: 'Name of alice' }, 'author is exactly { id, name }')
    t.match(body.data[0], { id: Number, content: 'message 1', subject: null, priority: 'normal', createdAt: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/ },
      'createdAt is an ISO-8601 string, subject may be null')
    const last = await get(app, '/v2/messages?page=30&limit=1')
    t.same(last.body.data, [all[29]], 'an author without a name appears with name null')
    t.equal(last.body.data[0].author.name, null)
  })

  t.test('sorting', async (t) => {
    const byPriorityAsc = all.slice().sort((a, b) => PRIORITY_RANK[a.priority] - PRIORITY_RANK[b.priority])
    const byPriorityDesc = all.slice().sort((a, b) => PRIORITY_RANK[b.priority] - PRIORITY_RANK[a.priority])
    // PostgreSQL: NULLs sort last ascending and first descending.
    const subjectKey = (m: Message) => m.subject === null ? 'zzzz' : m.subject
    const bySubjectAsc = all.slice().sort((a, b) => subjectKey(a).localeCompare(subjectKey(b)))
    const bySubjectDesc = all.slice().sort((a, b) => subjectKey(b).localeCompare(subjectKey(a)))

    for (const [name, query, expected] of [
      ['sort=priority: low < normal < high < urgent, ties by id ascending', 'sort=priority', byPriorityAsc],
      ['sort=priority&order=desc: ties still by id ascending', 'sort=priority&order=desc', byPriorityDesc],
      ['sort=subject, ties by id ascending', 'sort=subject', bySubjectAsc],
      ['sort=subject&order=desc', 'sort=subject&order=desc', bySubjectDesc],
      ['order=desc: id descending', 'order=desc', all.slice().reverse()],
      ['order=DESC: ascending', 'order=DESC', all],
      ['order=anything: ascending', 'order=anything', all],
      // 'message 10' sorts before 'message 2', so honouring sort=content would be visible.
      ['sort=content is not in the allowlist: id order', 'sort=content', all],
      ['sort=authorId is not in the allowlist: id order', 'sort=authorId&order=desc', all.slice().reverse()]
    ] as Array<[string, string, Message[]]>) {
      const { status, body } = await get(app, `/v2/messages?${query}&limit=100`)
      t.same({ status, body }, { status: 200, body: pageBody(expected, 1, 100, 30) }, name)
    }

    for (const [order, expected] of [['asc', byPriorityAsc], ['desc', byPriorityDesc]] as Array<[string, Message[]]>) {
      for (const limit of [4, 7]) {
        const walked = await allPages(t, app, `/v2/messages?sort=priority&order=${order}`, limit, 30)
        const ids = walked.map((m) => m.id)
        t.same(ids, expected.map((m) => m.id), `priority ${order}, limit ${limit}: pages concatenate to the full order`)
        t.equal(new Set(ids).size, 30, `priority ${order}, limit ${limit}: every id exactly once, no overlap, no skip`)
      }
    }
  })

  t.test('filters', async (t) => {
    const cases: Array<[string, string, Message[]]> = [
      ['authorId is converted to a number', `authorId=${bob.id}`, all.filter((m) => m.author.id === bob.id)],
      ['priority=urgent', 'priority=urgent', all.filter((m) => m.priority === 'urgent')],
      ['subject=weekly (exact)', 'subject=weekly', all.filter((m) => m.subject === 'weekly')],
      ['priority + authorId + subject combine', `priority=normal&authorId=${alice.id}&subject=daily`,
        all.filter((m) => m.priority === 'normal' && m.author.id === alice.id && m.subject === 'daily')]
    ]
    t.equal(cases[0]![2].length, 12, 'sanity: bob wrote 12')
    t.ok(cases[3]![2].length > 0 && cases[3]![2].length < all.filter((m) => m.priority === 'normal' && m.author.id === alice.id).length,
      'sanity: the combined filter is narrower than any two of its parts')
    for (const [name, query, expected] of cases) {
      const { status, body } = await get(app, `/v2/messages?${query}`)
      t.same({ status, body }, { status: 200, body: pageBody(expected, 1, 25, expected.length) }, name)
    }
    {
      const { status, body } = await get(app, `/v2/messages?authorId=${bob.id}&limit=5&page=3`)
      t.same({ status, body }, { status: 200, body: pageBody(cases[0]![2].slice(10, 15), 3, 5, 12) },
        'the last page of a filtered collection; total is the filtered count')
    }
    {
      const { status, body } = await get(app, '/v2/messages?authorId=999999')
      t.same({ status, body }, { status: 200, body: pageBody([], 1, 25, 0) },
        'a filter matching nothing: 200, data [], total 0, totalPages 0')
    }
    {
      const { status, body } = await get(app, '/v2/messages?authorId=abc')
      t.same({ status, body }, { status: 400, body: { error: 'Validation failed', details: ['authorId must be a number'] } },
        'authorId=abc: 400')
    }
    {
      const { status, body } = await get(app, '/v2/messages?priority=nope')
      t.same({ status, body }, { status: 400, body: { error: 'Validation failed', details: ['priority must be one of low, normal, high, urgent'] } },
        'an unknown enum value: 400 naming the allowed values')
    }
  })
})

t.test('a database failure while reading a collection, and recovery without restart', async (t) => {
  const app = await build(t)
  const alice = await createAuthor(app, 'alice')
  const [message] = await createMessages(app, alice.id, 1)
  const onePage = pageBody([message], 1, 25, 1)

  const leaks = /select|relation|from|messages_broken|movies_broken|stack|\/work/i

  await app.db.execute(sql`alter table messages rename to messages_broken`)
  {
    const { status, body, raw } = await get(app, '/v2/messages')
    t.same({ status, body }, { status: 500, body: { error: 'Failed to retrieve messages' } }, 'messages table gone: 500 Failed to retrieve messages')
    t.notMatch(raw, leaks, 'nothing about SQL or the relation in the body')
  }
  {
    const { status, body } = await get(app, '/v2/messages?page=2&sort=priority&priority=high')
    t.same({ status, body }, { status: 500, body: { error: 'Failed to retrieve messages' } }, 'the same for a filtered, sorted read')
  }
  await app.db.execute(sql`alter table messages_broken rename to messages`)
  {
    const { status, body } = await get(app, '/v2/messages')
    t.same({ status, body }, { status: 200, body: onePage }, 'table back: the next request succeeds without a restart')
  }

  await app.db.execute(sql`alter table movies rename to movies_broken`)
  {
    const { status, body, raw } = await get(app, '/v2/movies?genre=Drama')
    t.same({ status, body }, { status: 500, body: { error: 'Failed to retrieve movies' } }, 'movies table gone: 500 Failed to retrieve movies')
    t.notMatch(raw, leaks, 'nothing about SQL or the relation in the body')
  }
  await app.db.execute(sql`alter table movies_broken rename to movies`)
  {
    const { status, body } = await get(app, '/v2/movies?limit=1')
    t.same({ status, body }, { status: 200, body: pageBody([movie(1)], 1, 1, 54) }, 'movies back: the next request succeeds')
  }

  // The connection layer: concurrent reads all succeed on every driver (PGlite serialises them on
  // its one connection, postgres.js spreads them over its pool).
  const burst = await Promise.all(Array.from({ length: 20 }, () => get(app, '/v2/messages')))
  t.same(burst.map((r) => r.status), Array(20).fill(200), '20 concurrent reads: all 200')
  t.same(burst.map((r) => r.body), Array(20).fill(onePage), '20 concurrent reads: all the same page')

  // postgres.js names its connections; PGlite, embedded, has no client connection to name.
  const [{ app: applicationName } = { app: '' }] = await queryRows<{ app: string }>(app.db, sql`select current_setting('application_name') as app`)
  const server = process.env.TEST_DATABASE_URL
  if (server !== undefined && server !== '') {
    t.equal(applicationName, 'messages-api', 'PostgreSQL: the app talks to the server through its own named pool')
    // Kill every server connection of the app from outside, as a failover or an administrator
    // would, and show the pool reconnects by itself.
    const [{ name } = { name: '' }] = await queryRows<{ name: string }>(app.db, sql`select current_database() as name`)
    const admin = postgres(server, { max: 1, onnotice: () => {} })
    let terminated: Array<{ ok: boolean }>
    try {
      // Two statements: in one WHERE clause PostgreSQL may call pg_terminate_backend on rows the
      // other conditions would have excluded, the admin connection included.
      const pids = (await admin<Array<{ pid: number }>>`
        select pid from pg_stat_activity where datname = ${name} and application_name = 'messages-api'`).map((r) => r.pid)
      terminated = await admin<Array<{ ok: boolean }>>`select pg_terminate_backend(pid) as ok from unnest(${pids}::int[]) as pid`
      // pg_terminate_backend only signals; wait until those backends are gone (and a little longer:
      // a backend leaves pg_stat_activity just before its socket closes), so the next request is
      // made after the outage rather than racing it.
      for (let i = 0; i < 100; i++) {
        const [left] = await admin<Array<{ n: number }>>`select count(*)::int as n from pg_stat_activity where pid = any(${pids}::int[])`
        if (left?.n === 0) break
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      await new Promise((resolve) => setTimeout(resolve, 250))
    } finally {
      await admin.end()
    }
    t.ok(terminated.length >= 1 && terminated.every((r) => r.ok), `the app's connections were terminated (${terminated.length})`)

    const statuses: number[] = []
    for (let attempt = 0; attempt < 2; attempt++) {
      const { status, body } = await get(app, '/v2/messages')
      statuses.push(status)
      if (status === 200) {
        t.same(body, onePage, 'after the connections were killed: the data is served again')
        break
      }
      t.same({ status, body }, { status: 500, body: { error: 'Failed to retrieve messages' } }, 'a request that hit a dead connection: the collection 500')
    }
    t.equal(statuses.at(-1), 200, `recovered within two requests (statuses: ${statuses.join(', ')})`)
  } else {
    t.not(applicationName, 'messages-api', 'PGlite: embedded, no server connection exists that could be terminated')
  }
})
