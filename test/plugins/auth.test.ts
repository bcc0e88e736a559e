import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import auth from '../../plugins/auth.js'
import db from '../../plugins/db.js'
import errors from '../../plugins/errors.js'
import rateLimit from '../../plugins/rate-limit.js'
import users from '../../plugins/users.js'
import { freshDatabase } from '../helpers/database.js'
import { startTestIdp, type TestIdp } from '../helpers/idp.js'

// plugins/auth.ts on a bare Fastify, with the plugins it depends on (rate-limit) and the one that uses
// its callers (users, on a real database) and the error shape of plugins/errors.ts. Tokens are real RS256 ones from a key set
// served on loopback (test/helpers/idp.ts); nothing about verification is stubbed.

const AUDIENCE = 'backend-3-messages'
const UNAUTHORIZED = { error: 'Invalid or missing token' }
const ALICE = { sub: 'alice', role: 'Admin', email: 'alice@example.com', name: 'Alice' }

async function appFor (t: Test, idp: TestIdp): Promise<FastifyInstance> {
  const database = await freshDatabase()
  // As src/app.ts: a first start opens the database and applies migrations, which can take a while.
  const app = Fastify({ pluginTimeout: 120_000 })
  t.teardown(async () => {
    await app.close()
    await database.drop()
  })
  await app.register(errors, { development: false })
  await app.register(db, { url: database.dataDir === undefined ? database.url : undefined, dataDir: database.dataDir })
  await app.register(rateLimit, { max: 0 })
  await app.register(auth, { issuer: idp.url, audience: AUDIENCE })
  // The users plugin resolves the caller auth yields to a local user, provisioning it on first use.
  await app.register(users, { issuer: idp.url })
  app.get('/whoami', { onRequest: app.authenticate }, async (request) => request.user)
  app.get('/me', { onRequest: app.authenticate }, async (request) => await app.resolveLocalUser(request))
  await app.ready()
  return app
}

const call = async (app: FastifyInstance, url: string, authorization?: string) => {
  const response = await app.inject({ method: 'GET', url, headers: authorization === undefined ? {} : { authorization } })
  return { status: response.statusCode, body: response.json(), authenticate: response.headers['www-authenticate'], cache: response.headers['cache-control'] }
}

t.test('a valid RS256 token: the caller is request.user', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const app = await appFor(t, idp)
  t.same(await call(app, '/whoami', `Bearer ${await idp.sign(ALICE)}`), { status: 200, body: ALICE, authenticate: undefined, cache: 'no-store' })
  t.same(await call(app, '/whoami', `bearer ${await idp.sign({ sub: 'bob', email: undefined, name: undefined })}`),
    { status: 200, body: { sub: 'bob', role: 'User' }, authenticate: undefined, cache: 'no-store' }, 'the scheme is case-insensitive; role User by default')
})

t.test('every failure is 401 Invalid or missing token', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const app = await appFor(t, idp)
  const refused = { status: 401, body: UNAUTHORIZED, authenticate: 'Bearer error="invalid_token"', cache: 'no-store' }
  t.same(await call(app, '/whoami'), { ...refused, authenticate: 'Bearer' }, 'no Authorization header')
  t.same(await call(app, '/whoami', 'Basic YWxpY2U6c2VjcmV0'), { ...refused, authenticate: 'Bearer' }, 'another scheme')
  t.same(await call(app, '/whoami', 'Bearer not.a.token'), refused, 'malformed (not 400)')
  const cases: Array<[string, Promise<string>]> = [
    ['expired', idp.sign(ALICE, { expiresIn: -60 })],
    ['not yet valid', idp.sign(ALICE, { notBefore: 60 })],
    ['another audience', idp.sign(ALICE, { aud: 'someone-else' })],
    ['another issuer', idp.sign(ALICE, { iss: 'http://127.0.0.1:1' })],
    ['without exp', idp.sign(ALICE, { omit: ['exp'] })],
    ['signed by a key the set does not hold', idp.sign(ALICE, { key: 'foreign' })],
    ['HS256 with the public key as the secret', idp.sign(ALICE, { hs256WithPublicKey: true })],
    ['alg none', idp.sign(ALICE, { alg: 'none' })],
    ['RS512', idp.sign(ALICE, { alg: 'RS512' })]
  ]
  for (const [name, token] of cases) t.same(await call(app, '/whoami', `Bearer ${await token}`), refused, name)
})

t.test('the key set unreachable: 401', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const app = await appFor(t, idp)
  const token = await idp.sign(ALICE)
  idp.setDown(true)
  t.same(await call(app, '/whoami', `Bearer ${token}`), { status: 401, body: UNAUTHORIZED, authenticate: 'Bearer error="invalid_token"', cache: 'no-store' })
})

t.test('resolveLocalUser provisions the caller from userinfo once, with the caller\'s token', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const app = await appFor(t, idp)
  const token = await idp.sign(ALICE)
  const first = await call(app, '/me', `Bearer ${token}`)
  t.match(first, { status: 200, body: { id: Number, createdAt: String, updatedAt: String } })
  t.same(first.body, { id: first.body.id, subjectId: 'alice', email: 'alice@example.com', name: 'Alice', role: 'Admin', createdAt: first.body.createdAt, updatedAt: first.body.updatedAt })
  t.same(await call(app, '/me', `Bearer ${token}`), first, 'the same local user again')
  t.equal(idp.userinfoRequests, 1, 'one userinfo call')
  t.equal(idp.requests.find((r) => r.path.includes('userinfo'))?.authorization, `Bearer ${token}`, 'sent the caller\'s own token')
})

t.test('userinfo failing: 502, and no local user', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const app = await appFor(t, idp)
  idp.userinfoHandler = () => ({ status: 500, body: { error: 'down' } })
  const token = await idp.sign({ sub: 'carol', role: 'User' })
  t.same(await call(app, '/me', `Bearer ${token}`), { status: 502, body: { error: 'Failed to reach identity provider' }, authenticate: undefined, cache: 'no-store' })
  idp.userinfoHandler = undefined
  const again = await call(app, '/me', `Bearer ${token}`)
  t.match(again, { status: 200, body: { subjectId: 'carol' } }, 'provisioned once userinfo answers')
})
