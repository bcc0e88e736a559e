import t from 'tap'
import type { App } from '../../src/app.js'
import { build } from '../helpers/build.js'
import { createAuthor, createMessages } from '../helpers/fixtures.js'
import { cursorKinds, pagination } from '../helpers/pagination.js'

const UNAUTHORIZED = { error: 'Invalid or missing token' }
const FORBIDDEN = { error: 'Insufficient permissions' }
const NOT_FOUND = { error: 'Message not found' }
const BAD_ID = { error: 'Parameter "id" must be a positive integer' }
const CONTENT_REQUIRED = 'content is required and must be a string'
const invalid = (...details: string[]) => ({ status: 400, body: { error: 'Validation failed', details } })

interface Reply { status: number, body: any, location?: string | undefined }

type Caller = Record<string, unknown>

const headersOf = (caller?: Caller): Record<string, string> => caller === undefined ? {} : { 'x-test-user': JSON.stringify(caller) }

async function post (app: App, payload: unknown, caller?: Caller): Promise<Reply> {
  const res = await app.inject({ method: 'POST', url: '/v2/messages', headers: headersOf(caller), payload: payload as object })
  const location = res.headers.location
  return { status: res.statusCode, body: res.json(), ...(location === undefined ? {} : { location: String(location) }) }
}

async function get (app: App, url: string): Promise<Reply> {
  const res = await app.inject({ method: 'GET', url })
  return { status: res.statusCode, body: res.json() }
}

async function del (app: App, id: number | string, caller?: Caller): Promise<Reply> {
  const res = await app.inject({ method: 'DELETE', url: `/v2/messages/${id}`, headers: headersOf(caller) })
  return { status: res.statusCode, body: res.body === '' ? '' : res.json() }
}

async function total (app: App): Promise<number> {
  return (await get(app, '/v2/messages?limit=1')).body.pagination.total
}

t.test('/v2/messages: create, read, delete', async (t) => {
  const app = await build(t, { testAuth: true })
  const alice = { sub: 'alice', role: 'User', email: 'alice@example.com', name: 'Alice' }

  t.test('POST /v2/messages', async (t) => {
    const first = await post(app, { content: 'The deploy is done.' }, alice)
    const aliceUser = await app.usersRepository.findBySubject('alice')
    t.ok(aliceUser, 'the author was provisioned from the stub claims')
    t.match(first, {
      status: 201,
      body: { id: Number, content: 'The deploy is done.', subject: null, priority: 'normal', author: { id: aliceUser!.id, name: 'Alice' }, createdAt: String },
      location: `/v2/messages/${String(first.body.id)}`
    }, '201, Location, priority defaults to normal and subject to null')
    t.same(Object.keys(first.body).sort(), ['author', 'content', 'createdAt', 'id', 'priority', 'subject'], 'exactly the message item')
    t.ok(!Number.isNaN(Date.parse(first.body.createdAt)) && new Date(first.body.createdAt).toISOString() === first.body.createdAt, 'createdAt is ISO-8601')
    t.same(await get(app, `/v2/messages/${first.body.id}`), { status: 200, body: first.body }, 'GET /v2/messages/:id returns the same message')

    const full = await post(app, { content: 'Release notes', subject: 'Release 2.4', priority: 'urgent' }, alice)
    t.match(full, {
      status: 201,
      body: { id: first.body.id + 1, content: 'Release notes', subject: 'Release 2.4', priority: 'urgent', author: { id: aliceUser!.id, name: 'Alice' }, createdAt: String },
      location: `/v2/messages/${first.body.id + 1}`
    }, 'subject and priority are stored')
    t.same(await get(app, `/v2/messages/${full.body.id}`), { status: 200, body: full.body }, 'and read back')

    for (const priority of ['low', 'normal', 'high', 'urgent']) {
      const res = await post(app, { content: `p ${priority}`, priority }, alice)
      t.match(res, { status: 201, body: { id: Number, content: `p ${priority}`, subject: null, priority, author: { id: aliceUser!.id, name: 'Alice' }, createdAt: String } },
        `priority ${priority}: 201`)
    }

    {
      const content = 'x'.repeat(4000)
      const subject = 's'.repeat(200)
      const res = await post(app, { content, subject }, alice)
      t.match(res, { status: 201, body: { id: Number, content, subject, priority: 'normal', author: { id: aliceUser!.id, name: 'Alice' }, createdAt: String } },
        'content of exactly 4000 and subject of exactly 200 characters: 201')
    }
    {
      const res = await post(app, { content: '  padded  ', subject: '' }, alice)
      t.match(res, { status: 201, body: { id: Number, content: '  padded  ', subject: '', priority: 'normal', author: { id: aliceUser!.id, name: 'Alice' }, createdAt: String } },
        'content is stored as sent; an empty optional subject is allowed')
    }
    {
      const res = await post(app, { content: 'extra members', id: 999999, author: { id: 424242, name: 'Mallory' }, createdAt: '2000-01-01T00:00:00.000Z', authorId: 424242, foo: 'bar' }, alice)
      t.match(res, { status: 201, body: { id: Number, content: 'extra members', subject: null, priority: 'normal', author: { id: aliceUser!.id, name: 'Alice' }, createdAt: String } },
        'unknown body members are ignored: 201, the caller is the author')
      t.not(res.body.id, 999999, 'the id is generated, not taken from the body')
      t.not(res.body.createdAt, '2000-01-01T00:00:00.000Z', 'createdAt is generated, not taken from the body')
    }

    const nameless = await post(app, { content: 'no name' }, { sub: 'nameless', role: 'User' })
    t.match(nameless, { status: 201, body: { id: Number, content: 'no name', subject: null, priority: 'normal', author: { id: Number, name: null }, createdAt: String } },
      'an author without a name: author.name is null')
  })

  t.test('POST /v2/messages validation', async (t) => {
    const before = await total(app)
    const cases: Array<[string, unknown, ReturnType<typeof invalid>]> = [
      ['content missing', { subject: 'no content' }, invalid(CONTENT_REQUIRED)],
      ['an empty object', {}, invalid(CONTENT_REQUIRED)],
      ["content ''", { content: '' }, invalid(CONTENT_REQUIRED)],
      ["content '   ' (whitespace only)", { content: '   ' }, invalid(CONTENT_REQUIRED)],
      ['content of tabs and newlines', { content: '\t\n ' }, invalid(CONTENT_REQUIRED)],
      ['content 123 (never coerced)', { content: 123 }, invalid(CONTENT_REQUIRED)],
      ['content true', { content: true }, invalid(CONTENT_REQUIRED)],
      ['content null', { content: null }, invalid(CONTENT_REQUIRED)],
      ['content an array', { content: ['a'] }, invalid(CONTENT_REQUIRED)],
      ['content of 4001 characters', { content: 'x'.repeat(4001) }, invalid('content must be at most 4000 characters')],
      ['subject of 201 characters', { content: 'ok', subject: 's'.repeat(201) }, invalid('subject must be at most 200 characters')],
      ['subject 5', { content: 'ok', subject: 5 }, invalid('subject must be a string')],
      ["priority 'nope'", { content: 'ok', priority: 'nope' }, invalid('priority must be one of low, normal, high, urgent')],
      ["priority 'URGENT' (case-sensitive)", { content: 'ok', priority: 'URGENT' }, invalid('priority must be one of low, normal, high, urgent')],
      ['priority null', { content: 'ok', priority: null }, invalid('priority must be a string')],
      ['content, subject and priority all failing: reported together',
        { content: '', subject: 's'.repeat(201), priority: 'nope' },
        invalid(CONTENT_REQUIRED, 'subject must be at most 200 characters', 'priority must be one of low, normal, high, urgent')],
      ['content missing and priority wrong: reported together',
        { priority: 'nope' },
        invalid(CONTENT_REQUIRED, 'priority must be one of low, normal, high, urgent')],
      ['content too long and subject wrong type: reported together',
        { content: 'x'.repeat(4001), subject: 7 },
        invalid('content must be at most 4000 characters', 'subject must be a string')]
    ]
    for (const [name, payload, expected] of cases) {
      t.same(await post(app, payload, { sub: 'validator', role: 'User' }), expected, `${name}: 400`)
    }
    t.equal(await total(app), before, 'no failed create wrote a message')
    t.equal(await app.usersRepository.findBySubject('validator'), null, 'a failed create does not even provision the caller')
  })

  t.test('POST /v2/messages without a caller', async (t) => {
    const before = await total(app)
    t.same(await post(app, { content: 'hello' }), { status: 401, body: UNAUTHORIZED }, 'no x-test-user: 401')
    t.same(await post(app, { content: '' }), { status: 401, body: UNAUTHORIZED }, 'no x-test-user and an invalid body: 401, not 400')
    t.same(await post(app, { content: 'hello' }, { role: 'Admin' }), { status: 401, body: UNAUTHORIZED }, 'a stub without sub: 401')
    t.equal(await total(app), before, 'nothing written')
  })

  t.test('GET /v2/messages/:id', async (t) => {
    const author = await createAuthor(app, 'reader-author', { name: 'Reader' })
    const [message] = await createMessages(app, author.id, 1, { content: 'readable', subject: 'subj', priority: 'high' })
    t.same(await get(app, `/v2/messages/${message!.id}`), { status: 200, body: message }, 'public: 200 without a token')
    t.match(message, { id: Number, content: 'readable', subject: 'subj', priority: 'high', author: { id: author.id, name: 'Reader' }, createdAt: String }, 'sanity: the fixture')
    t.same(await get(app, '/v2/messages/999999'), { status: 404, body: NOT_FOUND }, 'absent: 404')
    for (const bad of ['abc', '0', '-1', '3.14', '1e400', String(Number.MAX_SAFE_INTEGER + 2)]) {
      t.same(await get(app, `/v2/messages/${bad}`), { status: 400, body: BAD_ID }, `id ${JSON.stringify(bad)}: 400`)
    }
  })

  t.test('DELETE /v2/messages/:id', async (t) => {
    const bob = await createAuthor(app, 'bob', { name: 'Bob' })
    const [own, others, forMod, forOwner] = await createMessages(app, bob.id, 4, (i) => ({ content: `bob's message ${i}` }))
    const asBob = { sub: 'bob', role: 'User' }

    t.same(await del(app, own!.id, asBob), { status: 204, body: '' }, 'the author (a User): 204, empty body')
    t.same(await get(app, `/v2/messages/${own!.id}`), { status: 404, body: NOT_FOUND }, 'then GET: 404')
    t.same(await del(app, own!.id, asBob), { status: 404, body: NOT_FOUND }, 'deleting it again: 404')

    t.same(await del(app, others!.id, { sub: 'eve', role: 'User' }), { status: 403, body: FORBIDDEN }, 'a User who is not the author: 403')
    t.same(await del(app, others!.id, { sub: 'root', role: 'Root' }), { status: 403, body: FORBIDDEN }, 'an unknown role who is not the author: 403')
    t.same(await del(app, others!.id), { status: 401, body: UNAUTHORIZED }, 'no caller: 401')
    t.same(await get(app, `/v2/messages/${others!.id}`), { status: 200, body: others }, 'the message is still there')

    t.same(await del(app, forMod!.id, { sub: 'mod', role: 'Moderator' }), { status: 204, body: '' }, 'a Moderator who is not the author: 204')
    t.same(await get(app, `/v2/messages/${forMod!.id}`), { status: 404, body: NOT_FOUND }, 'gone')
    t.same(await del(app, forOwner!.id, { sub: 'owner', role: 'Owner' }), { status: 204, body: '' }, 'an Owner: 204')
    t.same(await get(app, `/v2/messages/${forOwner!.id}`), { status: 404, body: NOT_FOUND }, 'gone')

    t.same(await del(app, 999999, asBob), { status: 404, body: NOT_FOUND }, 'an absent id as a User: 404')
    t.same(await del(app, 999999, { sub: 'mod', role: 'Moderator' }), { status: 404, body: NOT_FOUND }, 'an absent id as a Moderator: 404')
    for (const bad of ['abc', '0', '-1', '3.14']) {
      t.same(await del(app, bad, asBob), { status: 400, body: BAD_ID }, `id ${JSON.stringify(bad)}: 400`)
    }
    t.same(await del(app, 'abc'), { status: 401, body: UNAUTHORIZED }, 'no caller and a bad id: 401 first')
  })
})

t.test('a page served again from the page cache is the same JSON, and never outlives a write', async (t) => {
  const app = await build(t, { testAuth: true })
  const alice = await createAuthor(app, 'alice')
  await createMessages(app, alice.id, 3)
  const first = await app.inject({ method: 'GET', url: '/v2/messages?limit=2' })
  const again = await app.inject({ method: 'GET', url: '/v2/messages?limit=2' })
  t.equal(first.statusCode, 200)
  t.equal(again.headers['content-type'], 'application/json; charset=utf-8', 'sent as JSON')
  t.equal(again.body, first.body, 'the same bytes')
  t.same(cursorKinds(again.json()).pagination, pagination(1, 2, 3, 2))

  // Two page numbers past the largest offset share one clamped offset and one cached result: each keeps
  // its own page number.
  const huge = await get(app, '/v2/messages?page=1e300&limit=2')
  const huger = await get(app, '/v2/messages?page=2e300&limit=2')
  t.same([huge.body.pagination.page, huger.body.pagination.page], [1e300, 2e300])

  await post(app, { content: 'one more' }, { sub: 'alice', role: 'User' })
  const after = await get(app, '/v2/messages?limit=2')
  t.same(cursorKinds(after.body).pagination, pagination(1, 2, 4, 2), 'the next read after a write sees it')
  const search = await get(app, '/v2/messages/search?q=more&limit=2')
  t.same([search.body.data.length, search.body.pagination.total], [1, 1])
})
