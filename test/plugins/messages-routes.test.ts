import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import auth from '../../plugins/auth.js'
import changes, { changesOptions } from '../../plugins/changes.js'
import db from '../../plugins/db.js'
import errors from '../../plugins/errors.js'
import idempotency from '../../plugins/idempotency.js'
import messagesPlugin from '../../plugins/messages.js'
import rateLimit from '../../plugins/rate-limit.js'
import representation from '../../plugins/representation.js'
import users from '../../plugins/users.js'
import validation from '../../plugins/validation.js'
import messagesRoutes from '../../routes/messages/index.js'
import { SHARED_SCHEMAS } from '../../src/schemas/shared.js'
import { testConfig } from '../helpers/build.js'
import { NOT_HUNG_MS } from '../helpers/bounded.js'
import { freshDatabase } from '../helpers/database.js'
import { cursorKinds, pageBody } from '../helpers/pagination.js'

// routes/messages on a bare Fastify: the plugins whose decorators it uses, on a real database, with the
// SPEC 5.7 test stub for the caller (the real token path is test/plugins/auth.test.ts). Only what a
// client sees is asserted: statuses, bodies and headers as CONTRACT.md gives them.

const config = testConfig()
const UNAUTHORIZED = { error: 'Invalid or missing token' }
const FORBIDDEN = { error: 'Insufficient permissions' }
const NOT_FOUND = { error: 'Message not found' }
const ALICE = { sub: 'alice', role: 'User', email: 'alice@example.com', name: 'Alice' }
const BOB = { sub: 'bob', role: 'User', email: 'bob@example.com', name: 'Bob' }

async function appFor (t: Test): Promise<FastifyInstance> {
  const database = await freshDatabase()
  // As src/app.ts: a first start opens the database and applies migrations, which can take a while.
  const app = Fastify({ pluginTimeout: 120_000 })
  t.teardown(async () => {
    await app.close()
    await database.drop()
  })
  await app.register(validation)
  await app.register(errors, { development: false })
  await app.register(db, { url: database.dataDir === undefined ? database.url : undefined, dataDir: database.dataDir })
  await app.register(representation)
  await app.register(idempotency, { ttlHours: config.idempotencyTtlHours })
  await app.register(changes, changesOptions(config))
  await app.register(rateLimit, { max: 0 })
  await app.register(auth, { issuer: config.authIssuer, audience: config.apiAudience, testAuth: true })
  await app.register(users, { issuer: config.authIssuer })
  await app.register(messagesPlugin, { idempotencyTtlHours: config.idempotencyTtlHours })
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema)
  await app.register(messagesRoutes, { prefix: '/v2/messages' })
  await app.ready()
  return app
}

type Caller = typeof ALICE
const headersOf = (caller?: Caller): Record<string, string> => caller === undefined ? {} : { 'x-test-user': JSON.stringify(caller) }

async function call (app: FastifyInstance, method: 'GET' | 'POST' | 'DELETE', url: string, caller?: Caller, payload?: unknown) {
  const response = await app.inject({ method, url, headers: headersOf(caller), ...(payload === undefined ? {} : { payload: payload as object }) })
  return { status: response.statusCode, body: response.body === '' ? null : cursorKinds(response.json()), location: response.headers.location }
}

t.test('create, read, list and delete as CONTRACT 6 has them', async (t) => {
  const app = await appFor(t)
  t.same(await call(app, 'POST', '/v2/messages', undefined, { content: 'hi' }), { status: 401, body: UNAUTHORIZED, location: undefined }, 'POST without a caller: 401')
  t.same(await call(app, 'POST', '/v2/messages', ALICE, { subject: 'x' }),
    { status: 400, body: { error: 'Validation failed', details: ['content is required and must be a string'] }, location: undefined }, 'POST without content: 400')

  const created = await call(app, 'POST', '/v2/messages', ALICE, { content: 'hello', subject: 'Ops', priority: 'high' })
  t.match(created, { status: 201, body: { id: Number, author: { id: Number }, createdAt: String } })
  const message = created.body
  t.same(message, { id: message.id, content: 'hello', subject: 'Ops', priority: 'high', author: { id: message.author.id, name: 'Alice' }, createdAt: message.createdAt }, 'the message, its author the caller')
  t.equal(created.location, `/v2/messages/${message.id}`, 'Location')

  t.same(await call(app, 'GET', `/v2/messages/${message.id}`), { status: 200, body: message, location: undefined }, 'GET by id')
  t.same(await call(app, 'GET', `/v2/messages/${message.id + 1}`), { status: 404, body: NOT_FOUND, location: undefined }, 'GET an absent id: 404')
  t.same(await call(app, 'GET', '/v2/messages/abc'), { status: 400, body: { error: 'Parameter "id" must be a positive integer' }, location: undefined }, 'GET a bad id: 400')
  t.same(await call(app, 'GET', '/v2/messages'), { status: 200, body: pageBody([message], 1, 25, 1), location: undefined }, 'the list')
  t.same(await call(app, 'GET', '/v2/messages?priority=low'), { status: 200, body: pageBody([], 1, 25, 0), location: undefined }, 'a filter matching nothing')
  t.same(await call(app, 'GET', '/v2/messages/search'), { status: 400, body: { error: 'Missing required query parameter: q' }, location: undefined }, 'search without q: 400')
  t.same(await call(app, 'GET', '/v2/messages/search?q=HELL'), { status: 200, body: pageBody([message], 1, 25, 1), location: undefined }, 'search, case-insensitive')

  t.same(await call(app, 'DELETE', `/v2/messages/${message.id}`), { status: 401, body: UNAUTHORIZED, location: undefined }, 'DELETE without a caller: 401')
  t.same(await call(app, 'DELETE', `/v2/messages/${message.id}`, BOB), { status: 403, body: FORBIDDEN, location: undefined }, 'DELETE by another User: 403')
  t.same(await call(app, 'DELETE', `/v2/messages/${message.id}`, ALICE), { status: 204, body: null, location: undefined }, 'DELETE by the author: 204')
  t.same(await call(app, 'DELETE', `/v2/messages/${message.id}`, ALICE), { status: 404, body: NOT_FOUND, location: undefined }, 'DELETE again: 404')
  t.same(await call(app, 'GET', `/v2/messages/${message.id}`), { status: 404, body: NOT_FOUND, location: undefined }, 'gone')
})

t.test('the change feed: the created message as an upsert, the deleted one as a delete', async (t) => {
  const app = await appFor(t)
  // A client follows `next` while hasMore is true. On a PostgreSQL server that others use too, the feed
  // shows a change once the transactions open before it have ended, so the client polls (held, with
  // `wait`) until the change it made has come.
  const follow = async (since?: string) => {
    const data: Array<{ op: string, id: number }> = []
    let answer = await call(app, 'GET', `/v2/messages/changes${since === undefined ? '' : `?since=${since}&wait=5`}`)
    for (;;) {
      t.equal(answer.status, 200)
      data.push(...answer.body.data)
      if (answer.body.hasMore === false) return { data, next: answer.body.next as string }
      answer = await call(app, 'GET', `/v2/messages/changes?since=${answer.body.next}`)
    }
  }
  const start = await follow()
  t.same(start.data, [], 'an empty copy')
  const { body: message } = await call(app, 'POST', '/v2/messages', ALICE, { content: 'synced' })
  await call(app, 'DELETE', `/v2/messages/${message.id}`, ALICE)
  const seen: Array<{ op: string, id: number }> = []
  const until = Date.now() + NOT_HUNG_MS
  for (let next = start.next; !seen.some((change) => change.op === 'delete') && Date.now() < until;) {
    const answer = await follow(next)
    seen.push(...answer.data)
    next = answer.next
  }
  t.same(seen.at(-1), { op: 'delete', id: message.id }, 'the message, created and deleted since, ends as a delete')
  t.same(await call(app, 'GET', '/v2/messages/changes?since=nonsense'), { status: 400, body: { error: 'Invalid sync token' }, location: undefined }, 'a malformed token: 400')
})
