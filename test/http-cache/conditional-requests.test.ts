import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { buildApp, type App } from '../../src/app.js'
import { entityTag, ifNoneMatch } from '../../src/http-cache/entity-tag.js'
import { testConfig } from '../helpers/build.js'
import { freshDatabase } from '../helpers/database.js'
import { buildWithUrl } from '../helpers/exactness.js'
import { createAuthor, createMessages, queryRows } from '../helpers/fixtures.js'

// CONTRACT 12, conditional requests: every listed read carries a weak ETag and the right Cache-Control,
// If-None-Match answers 304 from the table versions alone, and any write, by the API or by another SQL
// client, changes the tag.

const alice = JSON.stringify({ sub: 'alice', role: 'Admin', email: 'alice@example.com' })
const bob = JSON.stringify({ sub: 'bob', role: 'User', email: 'bob@example.com' })
const WEAK_TAG = /^W\/"[\w-]{22}"$/

/** Runs SQL as a client other than the service: its own connection on PostgreSQL, raw SQL on PGlite. */
function otherClient (t: Test, app: App, url: string): (text: string) => Promise<void> {
  if (!url.startsWith('postgres')) return async (text) => { await queryRows(app.db, sql.raw(text)) }
  const client = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(async () => { await client.end() })
  return async (text) => { await client.unsafe(text) }
}

const READS: Array<{ url: string, user?: string, cacheControl: string }> = [
  { url: '/v2/messages?limit=5&sort=createdAt&order=desc', cacheControl: 'no-cache' },
  { url: '/v2/messages/search?q=message', cacheControl: 'no-cache' },
  { url: '/v2/messages/1', cacheControl: 'no-cache' },
  { url: '/v2/movies?genre=Drama', cacheControl: 'no-cache' },
  { url: '/v2/users?sort=name', user: alice, cacheControl: 'private, no-cache' },
  { url: '/v2/users/1', user: alice, cacheControl: 'private, no-cache' },
  { url: '/v2/users/me', user: alice, cacheControl: 'private, no-cache' }
]

t.test('If-None-Match: one tag, a list, weak and strong forms, *, and what does not parse', async (t) => {
  const tag = entityTag('1,2', 'key')
  t.match(tag, WEAK_TAG)
  const opaque = tag.slice(2)
  t.equal(ifNoneMatch(tag, tag), 'tag')
  t.equal(ifNoneMatch(opaque, tag), 'tag', 'weak comparison ignores W/')
  t.equal(ifNoneMatch(`"other", ${tag} ,W/"x"`, tag), 'tag')
  t.equal(ifNoneMatch(' * ', tag), 'any')
  t.equal(ifNoneMatch('W/"other"', tag), false)
  t.equal(ifNoneMatch(`${tag.slice(0, -2)}"`, tag), false)
  t.equal(ifNoneMatch(`${opaque} garbage`, tag), false, 'an unparsable list matches nothing')
  t.equal(ifNoneMatch(undefined, tag), false)
  t.not(entityTag('1,2', 'key'), entityTag('1,3', 'key'), 'another version, another tag')
  t.not(entityTag('1,2', 'key'), entityTag('1,2', 'other'), 'another request, another tag')
})

t.test('every listed read: ETag and Cache-Control, 304 with the same tag for a match, 200 for a stale one', async (t) => {
  const app = await buildWithUrl(t).then(({ app }) => app)
  const author = await createAuthor(app, 'alice', { role: 'Admin' })
  await createMessages(app, author.id, 12)
  for (const read of READS) {
    const headers = read.user === undefined ? {} : { 'x-test-user': read.user }
    const first = await app.inject({ url: read.url, headers })
    t.equal(first.statusCode, 200, read.url)
    const tag = first.headers.etag as string
    t.match(tag, WEAK_TAG, `${read.url} has a weak ETag`)
    t.equal(first.headers['cache-control'], read.cacheControl, `${read.url} Cache-Control`)
    t.match(first.headers['content-security-policy'], /default-src 'self'/)

    for (const given of [tag, tag.slice(2), `W/"nope", ${tag}`, '*']) {
      const again = await app.inject({ url: read.url, headers: { ...headers, 'if-none-match': given } })
      t.equal(again.statusCode, 304, `${read.url} If-None-Match: ${given}`)
      t.equal(again.body, '', 'no body')
      t.equal(again.headers.etag, tag, 'the same ETag')
      t.equal(again.headers['cache-control'], read.cacheControl)
      t.notOk(again.headers['content-type'], 'no content type without a body')
      t.notOk(again.headers['content-security-policy'], 'the stored 200 keeps its security headers; the 304 does not repeat them')
      t.match(again.headers['x-request-id'], /./)
    }
    const stale = await app.inject({ url: read.url, headers: { ...headers, 'if-none-match': 'W/"stale"' } })
    t.equal(stale.statusCode, 200, `${read.url}: a stale tag gets the body`)
    t.equal(stale.body, first.body)
    t.equal(stale.headers.etag, tag)
  }
})

t.test('an API write changes the tags of what it changes; the stale tag then gets the new body', async (t) => {
  const app = await buildWithUrl(t).then(({ app }) => app)
  await createAuthor(app, 'alice', { role: 'Admin' })
  const created = await app.inject({ method: 'POST', url: '/v2/messages', headers: { 'x-test-user': alice }, payload: { content: 'first' } })
  t.equal(created.statusCode, 201)
  t.equal(created.headers['cache-control'], 'no-store', 'writes are never stored')
  t.notOk(created.headers.etag)

  const list = await app.inject({ url: '/v2/messages' })
  const item = await app.inject({ url: '/v2/messages/1' })
  await app.inject({ method: 'POST', url: '/v2/messages', headers: { 'x-test-user': alice }, payload: { content: 'second' } })

  const listAfter = await app.inject({ url: '/v2/messages', headers: { 'if-none-match': list.headers.etag as string } })
  t.equal(listAfter.statusCode, 200)
  t.equal(listAfter.json().pagination.total, 2)
  t.not(listAfter.headers.etag, list.headers.etag)
  const revalidated = await app.inject({ url: '/v2/messages', headers: { 'if-none-match': listAfter.headers.etag as string } })
  t.equal(revalidated.statusCode, 304, 'the new tag is current')

  const deleted = await app.inject({ method: 'DELETE', url: '/v2/messages/1', headers: { 'x-test-user': alice } })
  t.equal(deleted.statusCode, 204)
  const itemAfter = await app.inject({ url: '/v2/messages/1', headers: { 'if-none-match': item.headers.etag as string } })
  t.equal(itemAfter.statusCode, 404, 'a deleted message is 404 whatever tag the client holds')
  t.same(itemAfter.json(), { error: 'Message not found' })
  t.equal(itemAfter.headers['cache-control'], 'no-store', 'errors are never stored')
  t.notOk(itemAfter.headers.etag, 'errors carry no tag')
  const star = await app.inject({ url: '/v2/messages/1', headers: { 'if-none-match': '*' } })
  t.equal(star.statusCode, 404, 'If-None-Match: * does not match a message that does not exist')
})

t.test('a write by another SQL client changes the tag, exactly as it changes the body', async (t) => {
  const { app, url } = await buildWithUrl(t)
  const exec = otherClient(t, app, url)
  const author = await createAuthor(app, 'alice', { role: 'Admin', name: 'Alice' })
  await createMessages(app, author.id, 3)

  const reads = ['/v2/messages', '/v2/messages/2', '/v2/messages/search?q=message', '/v2/movies']
  const before = new Map<string, string>()
  for (const path of reads) before.set(path, (await app.inject({ url: path })).headers.etag as string)

  await exec("UPDATE messages SET content = 'changed by hand' WHERE id = 2")
  for (const path of reads.slice(0, 2)) {
    const after = await app.inject({ url: path, headers: { 'if-none-match': before.get(path)! } })
    t.equal(after.statusCode, 200, `${path} after an UPDATE by SQL`)
    t.match(after.body, 'changed by hand')
  }
  const search = await app.inject({ url: reads[2]!, headers: { 'if-none-match': before.get(reads[2]!)! } })
  t.equal(search.statusCode, 200, 'the search tag changes too')
  t.same(search.json().data.map((m: { id: number }) => m.id), [1, 3], 'and the message no longer matches')
  const movies = await app.inject({ url: '/v2/movies', headers: { 'if-none-match': before.get('/v2/movies')! } })
  t.equal(movies.statusCode, 304, 'a write to messages leaves the movies tag alone')

  // The author's name shows in every message: renaming them by SQL is a change of the message too.
  const item = await app.inject({ url: '/v2/messages/2' })
  await exec("UPDATE users SET name = 'Alicia' WHERE subject_id = 'alice'")
  const renamed = await app.inject({ url: '/v2/messages/2', headers: { 'if-none-match': item.headers.etag as string } })
  t.equal(renamed.statusCode, 200)
  t.equal(renamed.json().author.name, 'Alicia')

  const moviesTag = movies.headers.etag as string
  await exec("INSERT INTO movies (title, year, rating, genre) VALUES ('Hand Loaded', 2001, 7.5, 'Drama')")
  const moviesAfter = await app.inject({ url: '/v2/movies', headers: { 'if-none-match': moviesTag } })
  t.equal(moviesAfter.statusCode, 200, 'a movie inserted by SQL changes the movies tag')
  t.not(moviesAfter.headers.etag, moviesTag)

  const list = await app.inject({ url: '/v2/messages' })
  await exec('DELETE FROM messages WHERE id = 3')
  const listAfter = await app.inject({ url: '/v2/messages', headers: { 'if-none-match': list.headers.etag as string } })
  t.equal(listAfter.statusCode, 200, 'a DELETE by SQL changes the list tag')
  t.equal(listAfter.json().pagination.total, 2)
})

t.test('tags differ between callers where the body does', async (t) => {
  const app = await buildWithUrl(t).then(({ app }) => app)
  await createAuthor(app, 'alice', { role: 'Admin' })
  await createAuthor(app, 'bob')
  const aliceMe = await app.inject({ url: '/v2/users/me', headers: { 'x-test-user': alice } })
  const bobMe = await app.inject({ url: '/v2/users/me', headers: { 'x-test-user': bob } })
  t.equal(aliceMe.statusCode, 200)
  t.equal(bobMe.statusCode, 200)
  t.not(aliceMe.headers.etag, bobMe.headers.etag)
  const crossed = await app.inject({ url: '/v2/users/me', headers: { 'x-test-user': bob, 'if-none-match': aliceMe.headers.etag as string } })
  t.equal(crossed.statusCode, 200, "alice's tag is not bob's")
  t.equal(crossed.json().subjectId, 'bob')

  // The same user read by alice (Admin) and by bob (himself) is the same body, but the answer depends
  // on who asks: bob's tag for user 2 never lets alice skip her own check, and the other way round.
  const bobId = bobMe.json().id as number
  const byAlice = await app.inject({ url: `/v2/users/${bobId}`, headers: { 'x-test-user': alice } })
  const byBob = await app.inject({ url: `/v2/users/${bobId}`, headers: { 'x-test-user': bob } })
  t.not(byAlice.headers.etag, byBob.headers.etag)
  const forbidden = await app.inject({ url: `/v2/users/${aliceMe.json().id as number}`, headers: { 'x-test-user': bob, 'if-none-match': '*' } })
  t.equal(forbidden.statusCode, 403, 'If-None-Match: * does not skip the permission check')
  t.same(forbidden.json(), { error: 'Insufficient permissions' })
})

t.test('other answers: no-store and no tag on errors, other authenticated reads and writes', async (t) => {
  const app = await buildWithUrl(t).then(({ app }) => app)
  const cases = [
    { url: '/v2/messages?priority=bogus', status: 400 },
    { url: '/v2/messages/search', status: 400 },
    { url: '/v2/messages/abc', status: 400 },
    { url: '/v2/users/me', status: 401 },
    { url: '/v2/hello', status: 200, user: alice },
    { url: '/v2/nothing-here', status: 404 }
  ]
  for (const c of cases) {
    const res = await app.inject({ url: c.url, headers: c.user === undefined ? {} : { 'x-test-user': c.user } })
    t.equal(res.statusCode, c.status, c.url)
    t.equal(res.headers['cache-control'], 'no-store', `${c.url}: no-store`)
    t.notOk(res.headers.etag, `${c.url}: no ETag`)
  }
})

// Proof that a 304 reads no page, row or count: the tables behind the bodies are renamed away, so any
// read of them fails, while the versions stay where they are. A second instance with nothing cached
// still answers the first instance's tags with 304, and fails only when it must read a body.
t.test('the 304 is decided from the table versions alone', async (t) => {
  const first = await twoInstances(t)
  const author = await createAuthor(first.app, 'alice', { role: 'Admin' })
  await createMessages(first.app, author.id, 30)
  const paths = ['/v2/messages?page=2&limit=10', '/v2/messages/search?q=message&sort=createdAt', '/v2/messages/7', '/v2/users/me']
  const tags = new Map<string, string>()
  for (const path of paths) {
    const res = await first.app.inject({ url: path, headers: { 'x-test-user': alice } })
    t.equal(res.statusCode, 200, path)
    tags.set(path, res.headers.etag as string)
  }
  const second = await first.next()
  await queryRows(second.db, sql`ALTER TABLE messages RENAME TO messages_away`)
  await queryRows(second.db, sql`ALTER TABLE users RENAME TO users_away`)
  for (const path of paths) {
    const revalidated = await second.inject({ url: path, headers: { 'x-test-user': alice, 'if-none-match': tags.get(path)! } })
    t.equal(revalidated.statusCode, 304, `${path}: 304 without touching the table`)
    t.equal(revalidated.headers.etag, tags.get(path), 'and the same tag from another instance')
    const full = await second.inject({ url: path, headers: { 'x-test-user': alice } })
    t.equal(full.statusCode, 500, `${path}: the body itself cannot be read`)
  }
})

/** One database, opened by one app and then by a second, fresh one (PGlite on disk, or PostgreSQL). */
async function twoInstances (t: Test): Promise<{ app: App, next: () => Promise<App> }> {
  const server = process.env.TEST_DATABASE_URL
  if (server !== undefined && server !== '') {
    const database = await freshDatabase()
    const open = async () => {
      const app = await buildApp(testConfig({ databaseUrl: database.dataDir === undefined ? database.url : undefined }), { logger: false, testAuth: true, dataDir: database.dataDir })
      t.teardown(async () => { await app.close() })
      return app
    }
    t.teardown(async () => { await database.drop() })
    const app = await open()
    return { app, next: open }
  }
  const dataDir = await mkdtemp(join(tmpdir(), 'conditional-'))
  t.teardown(async () => { await rm(dataDir, { recursive: true, force: true }) })
  const open = async () => buildApp(testConfig({ databaseUrl: undefined }), { logger: false, testAuth: true, dataDir })
  const app = await open()
  // The embedded database has one owner at a time: the first instance closes before the second opens.
  return {
    app,
    next: async () => {
      await app.close()
      const second = await open()
      t.teardown(async () => { await second.close() })
      return second
    }
  }
}
