import { sql } from 'drizzle-orm'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import t from 'tap'
import { BODY_LIMIT } from '../../src/app.js'
import { build } from '../helpers/build.js'
import { createAuthor, createMessages } from '../helpers/fixtures.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
// SPEC 7.1 / CONTRACT 8: outside development no error body names a stack, a path, SQL or the driver.
const LEAKS = ['stack', '/work', 'select', 'relation', 'node_modules', 'postgres', 'pglite', 'users_broken']

const ALICE = { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User' }) }

t.test('CONTRACT 8: every failure is JSON { error }, and no detail leaks', async (t) => {
  const app = await build(t, { testAuth: true })
  const seen: LightMyRequestResponse[] = []
  const send = async (options: InjectOptions) => {
    const res = await app.inject(options)
    seen.push(res)
    return { status: res.statusCode, body: res.json(), res }
  }
  const jsonPost = (url: string, payload: string, headers: Record<string, string> = {}): InjectOptions =>
    ({ method: 'POST', url, payload, headers: { 'content-type': 'application/json', ...headers } })

  const alice = await createAuthor(app, 'alice')
  const [message] = await createMessages(app, alice.id, 1, { subject: 'hello', priority: 'high' })

  t.test('unknown routes and methods', async (t) => {
    t.same(await send({ method: 'GET', url: '/nope' }).then(({ status, body }) => ({ status, body })),
      { status: 404, body: { error: 'Not found' } }, 'an unknown route: 404 Not found')
    t.same(await send({ method: 'GET', url: '/v2/nope/deeper?x=1' }).then(({ status, body }) => ({ status, body })),
      { status: 404, body: { error: 'Not found' } }, 'an unknown route under /v2: 404 Not found')
    t.same(await send({ method: 'DELETE', url: '/health' }).then(({ status, body }) => ({ status, body })),
      { status: 404, body: { error: 'Not found' } }, 'an unknown method on a known path: 404 Not found')
  })

  t.test('request bodies', async (t) => {
    const valid = '{"name":"Alice","email":"alice@example.com"}'
    const cases: Array<[string, InjectOptions, number, unknown]> = [
      ['malformed JSON: 400 Malformed JSON body', jsonPost('/v2/input/users', '{"name":'), 400, { error: 'Malformed JSON body' }],
      ['JSON with a trailing comma: 400 Malformed JSON body', jsonPost('/v2/input/users', '{"name":"a","email":"b",}'), 400, { error: 'Malformed JSON body' }],
      ['an empty body declared as JSON: 400 Malformed JSON body', jsonPost('/v2/input/users', ''), 400, { error: 'Malformed JSON body' }],
      ['malformed JSON on a protected route, past authentication: 400 Malformed JSON body',
        jsonPost('/v2/messages', '{content', ALICE), 400, { error: 'Malformed JSON body' }],
      ['a body of exactly 100 KiB is accepted',
        jsonPost('/v2/input/users', valid + ' '.repeat(BODY_LIMIT - valid.length)), 201, { name: 'Alice', email: 'alice@example.com' }],
      ['a body one byte over 100 KiB: 413 Request body too large',
        jsonPost('/v2/input/users', valid + ' '.repeat(BODY_LIMIT - valid.length + 1)), 413, { error: 'Request body too large' }],
      ['a body far over 100 KiB: 413 Request body too large',
        jsonPost('/v2/input/users', JSON.stringify({ name: 'x'.repeat(200 * 1024), email: 'a@b.c' })), 413, { error: 'Request body too large' }],
      ['text/plain on a JSON route: 415 Unsupported media type',
        { method: 'POST', url: '/v2/input/users', payload: valid, headers: { 'content-type': 'text/plain' } }, 415, { error: 'Unsupported media type' }],
      ['a form body on a JSON route: 415 Unsupported media type',
        { method: 'POST', url: '/v2/input/users', payload: 'name=a&email=b', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415, { error: 'Unsupported media type' }],
      ['text/plain on a protected route, past authentication: 415',
        { method: 'POST', url: '/v2/messages', payload: 'hi', headers: { 'content-type': 'text/plain', ...ALICE } }, 415, { error: 'Unsupported media type' }]
    ]
    t.equal(BODY_LIMIT, 100 * 1024, 'the body limit is 100 KiB')
    for (const [name, options, status, body] of cases) {
      const reply = await send(options)
      t.same({ status: reply.status, body: reply.body }, { status, body }, name)
    }
  })

  t.test('path ids and missing resources', async (t) => {
    const cases: Array<[string, string, number, unknown]> = [
      ['GET /v2/messages/abc: 400', '/v2/messages/abc', 400, { error: 'Parameter "id" must be a positive integer' }],
      ['GET /v2/messages/0: 400', '/v2/messages/0', 400, { error: 'Parameter "id" must be a positive integer' }],
      ['GET /v2/messages/1.5: 400', '/v2/messages/1.5', 400, { error: 'Parameter "id" must be a positive integer' }],
      ['GET /v2/messages/9007199254740992 (unsafe): 400', '/v2/messages/9007199254740992', 400, { error: 'Parameter "id" must be a positive integer' }],
      ['GET /v2/messages/999: 404 Message not found', '/v2/messages/999', 404, { error: 'Message not found' }],
      ['GET /v2/messages/9007199254740991 (largest safe id, absent): 404', '/v2/messages/9007199254740991', 404, { error: 'Message not found' }],
      ['GET an existing message: 200, the message', `/v2/messages/${message!.id}`, 200, message],
      // Longer than the router's default limit on a parameter (100), which answered 414: the route's own rule.
      ['GET /v2/messages/<150 nines>: 400', `/v2/messages/${'9'.repeat(150)}`, 400, { error: 'Parameter "id" must be a positive integer' }],
      ['GET /v2/input/users/<5000 ones>: 400', `/v2/input/users/${'1'.repeat(5000)}`, 400, { error: 'Parameter "id" must be a positive integer' }],
      // The longest cursor the document promises still reaches the route: not a 431.
      ['GET /v2/messages?after=<8192 characters>: 400 Invalid cursor', `/v2/messages?after=${'A'.repeat(8192)}`, 400, { error: 'Invalid cursor' }]
    ]
    for (const [name, url, status, body] of cases) {
      const reply = await send({ method: 'GET', url })
      t.same({ status: reply.status, body: reply.body }, { status, body }, name)
    }
  })

  t.test('x-request-id', async (t) => {
    const ids = new Set<string>()
    for (const res of seen) {
      const id = res.headers['x-request-id']
      t.match(id, UUID, `${res.statusCode} ${res.raw.req.url}: a generated uuid x-request-id`)
      ids.add(String(id))
    }
    t.equal(ids.size, seen.length, 'a new id for every request')

    const sane = 'req-42.a:b@c/d+e=f_G'
    for (const [url, status] of [['/health', 200], ['/nope', 404], ['/v2/messages/abc', 400]] as const) {
      const res = await app.inject({ method: 'GET', url, headers: { 'x-request-id': sane } })
      t.same([res.statusCode, res.headers['x-request-id']], [status, sane], `${url}: a sane caller id is echoed`)
    }
    for (const [name, insane] of [['300 characters', 'a'.repeat(300)], ['spaces', 'has spaces'], ['percent escapes', 'a%0d%0ab'], ['quotes', '"x"']]) {
      const res = await app.inject({ method: 'GET', url: '/health', headers: { 'x-request-id': insane } })
      t.equal(res.statusCode, 200)
      t.match(res.headers['x-request-id'], UUID, `an insane caller id (${name}) is replaced by a uuid`)
    }
    const res = await app.inject({ method: 'GET', url: '/health', headers: { 'x-request-id': '' } })
    t.match(res.headers['x-request-id'], UUID, 'an empty caller id is replaced by a uuid')
  })

  t.test('central error handler: an unexpected error is 500 Internal server error', async (t) => {
    // A message never read before: one that was is remembered until the next write, and a renamed
    // table is no write.
    const [unread] = await createMessages(app, alice.id, 1)
    await app.db.execute(sql`alter table users rename to users_broken`)
    t.teardown(async () => { await app.db.execute(sql`alter table users_broken rename to users`) })
    // Not a collection read: nothing maps this failure, so the central handler answers.
    const reply = await send({ method: 'GET', url: `/v2/messages/${unread!.id}` })
    t.same({ status: reply.status, body: reply.body }, { status: 500, body: { error: 'Internal server error' } },
      'exactly { error: "Internal server error" }, no stack')
    t.match(reply.res.headers['x-request-id'], UUID, 'a 500 carries x-request-id too')
  })

  t.test('no error body leaks anything', async (t) => {
    const errors = seen.filter((res) => res.statusCode >= 400)
    t.same([...new Set(errors.map((res) => res.statusCode))].sort(), [400, 404, 413, 415, 500], 'every kind of error was seen')
    for (const res of errors) {
      const where = `${res.statusCode} ${res.raw.req.method} ${res.raw.req.url}`
      t.match(res.headers['content-type'], /^application\/json/, `${where}: JSON`)
      t.type(res.json().error, 'string', `${where}: a string error`)
      for (const word of LEAKS) t.notOk(res.body.toLowerCase().includes(word), `${where}: no "${word}" in the body`)
    }
  })
})

t.test('SPEC 7.4: in development a 500 carries the real message and the stack', async (t) => {
  const app = await build(t, { config: { development: true } })
  const alice = await createAuthor(app, 'alice')
  const [message] = await createMessages(app, alice.id, 1)

  await app.db.execute(sql`alter table users rename to users_broken`)
  // The error the handler will meet, produced for real by the same repository call.
  const real = await app.messagesRepository.getOne(message!.id, { scope: '', ifNoneMatch: undefined }).then(() => null, (err: unknown) => err as Error)
  t.ok(real instanceof Error, 'the broken table makes the lookup fail')

  const res = await app.inject({ method: 'GET', url: `/v2/messages/${message!.id}` })
  const body = res.json()
  t.equal(res.statusCode, 500, '500')
  t.same(Object.keys(body).sort(), ['error', 'stack'], 'exactly error and stack')
  t.equal(body.error, real!.message, 'error is the real message')
  t.not(body.error, 'Internal server error')
  t.type(body.stack, 'string', 'stack is a string')
  t.match(body.stack, /\n\s+at /, 'stack holds a stack trace')

  const list = await app.inject({ method: 'GET', url: '/v2/messages' })
  t.equal(list.statusCode, 500, 'a collection read failure: 500')
  t.match(list.json(), { error: 'Failed to retrieve messages', stack: String }, 'in development too it names the collection, plus the stack')

  await app.db.execute(sql`alter table users_broken rename to users`)
  const back = await app.inject({ method: 'GET', url: `/v2/messages/${message!.id}` })
  t.same([back.statusCode, back.json()], [200, message], 'table restored: 200 again')
})
