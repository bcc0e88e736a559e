import t from 'tap'
import type { App } from '../../src/app.js'
import { build } from '../helpers/build.js'
import { startTestIdp } from '../helpers/idp.js'

const UNAUTHORIZED = { error: 'Invalid or missing token' }
const FORBIDDEN = { error: 'Insufficient permissions' }
const AUDIENCE = 'backend-3-messages'

interface Reply { status: number, body: unknown }

async function hello (app: App, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await app.inject({ method: 'GET', url: '/v2/hello', headers })
  return { status: res.statusCode, body: res.json() }
}

const testUser = (claims: unknown): Record<string, string> => ({ 'x-test-user': JSON.stringify(claims) })

t.test('SPEC 5.7: the x-test-user stub, when the app is built with testAuth', async (t) => {
  const app = await build(t, { testAuth: true })

  t.same(await hello(app), { status: 401, body: UNAUTHORIZED }, 'no x-test-user: 401')
  t.same(await hello(app, { 'x-test-user': '{"sub":"alice","role":"Admin","email":"alice@example.com"}' }),
    { status: 200, body: { message: 'Hello, alice@example.com!', role: 'Admin' } }, 'Admin: 200 with the email from the header')
  t.same(await hello(app, testUser({ sub: 'sam', role: 'SuperAdmin', email: 'sam@example.com' })),
    { status: 200, body: { message: 'Hello, sam@example.com!', role: 'SuperAdmin' } }, 'SuperAdmin: 200')
  t.same(await hello(app, testUser({ sub: 'olga', role: 'Owner', email: 'olga@example.com' })),
    { status: 200, body: { message: 'Hello, olga@example.com!', role: 'Owner' } }, 'Owner: 200')
  t.same(await hello(app, testUser({ sub: 'bob', role: 'User', email: 'bob@example.com' })), { status: 403, body: FORBIDDEN }, 'User: 403')
  t.same(await hello(app, testUser({ sub: 'mo', role: 'Moderator', email: 'mo@example.com' })), { status: 403, body: FORBIDDEN }, 'Moderator: 403')
  t.same(await hello(app, testUser({ sub: 'nobody', email: 'nobody@example.com' })), { status: 403, body: FORBIDDEN }, 'no role: a User, 403')
  t.same(await hello(app, testUser({ sub: 'root', role: 'Root' })), { status: 403, body: FORBIDDEN }, 'an unknown role: 403')
  t.same(await hello(app, testUser({ sub: 'lower', role: 'admin' })), { status: 403, body: FORBIDDEN }, 'roles are case-sensitive: admin is unknown, 403')

  const unreadable: Array<[string, string]> = [
    ['malformed JSON', '{"sub":"alice","role":"Admin"'],
    ['not JSON at all', 'alice'],
    ['an empty header', ''],
    ['JSON null', 'null'],
    ['a JSON string', '"alice"'],
    ['a JSON number', '42'],
    ['a JSON array', '[{"sub":"alice","role":"Admin"}]'],
    ['no sub', '{"role":"Admin","email":"a@example.com"}'],
    ['an empty sub', '{"sub":"","role":"Admin"}'],
    ['a numeric sub', '{"sub":7,"role":"Admin"}']
  ]
  for (const [name, header] of unreadable) {
    t.same(await hello(app, { 'x-test-user': header }), { status: 401, body: UNAUTHORIZED }, `${name}: 401`)
  }

  {
    const res = await app.inject({ method: 'GET', url: '/v2/hello', headers: { authorization: 'Bearer whatever', ...testUser({ sub: 'alice', role: 'Admin', email: 'alice@example.com' }) } })
    t.same({ status: res.statusCode, body: res.json() }, { status: 200, body: { message: 'Hello, alice@example.com!', role: 'Admin' } },
      'under the stub, the header decides and an Authorization header is not verified')
  }
  {
    const res = await app.inject({ method: 'GET', url: '/v2/users/me', headers: testUser({ sub: 'alice', role: 'Admin', email: 'alice@example.com', name: 'Alice' }) })
    t.match({ status: res.statusCode, body: res.json() }, {
      status: 200,
      body: { id: Number, subjectId: 'alice', email: 'alice@example.com', name: 'Alice', role: 'Admin', createdAt: String, updatedAt: String }
    }, 'the stub caller is a full caller: /v2/users/me provisions it from the header claims')
  }
})

t.test('the production app ignores x-test-user entirely', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const app = await build(t, { config: { authIssuer: idp.url, apiAudience: AUDIENCE } })
  const adminHeader = testUser({ sub: 'alice', role: 'Admin', email: 'alice@example.com' })

  t.same(await hello(app, adminHeader), { status: 401, body: UNAUTHORIZED }, 'only an x-test-user Admin header: 401')
  t.same(await hello(app, testUser({ sub: 'olga', role: 'Owner', email: 'olga@example.com' })), { status: 401, body: UNAUTHORIZED }, 'only an x-test-user Owner header: 401')
  {
    const res = await app.inject({ method: 'POST', url: '/v2/messages', headers: adminHeader, payload: { content: 'hi' } })
    t.same({ status: res.statusCode, body: res.json() }, { status: 401, body: UNAUTHORIZED }, 'POST /v2/messages with only the header: 401')
  }

  const userToken = await idp.sign({ sub: 'bob', role: 'User', email: 'bob@example.com' })
  t.same(await hello(app, { authorization: `Bearer ${userToken}`, ...adminHeader }), { status: 403, body: FORBIDDEN },
    'a real User token plus an x-test-user Admin header: 403, the header grants nothing')
  t.same(await hello(app, { authorization: `Bearer ${userToken}` }), { status: 403, body: FORBIDDEN }, 'the same token alone: 403')

  const adminToken = await idp.sign({ sub: 'carol', role: 'Admin', email: 'carol@example.com' })
  t.same(await hello(app, { authorization: `Bearer ${adminToken}`, ...testUser({ sub: 'bob', role: 'User', email: 'bob@example.com' }) }),
    { status: 200, body: { message: 'Hello, carol@example.com!', role: 'Admin' } }, 'a real Admin token plus an x-test-user User header: the token decides, 200')
  {
    const res = await app.inject({ method: 'GET', url: '/v2/users/me', headers: { authorization: `Bearer ${userToken}`, ...testUser({ sub: 'alice', role: 'Owner', email: 'alice@example.com', name: 'Alice' }) } })
    t.match({ status: res.statusCode, body: res.json() }, {
      status: 200,
      body: { id: Number, subjectId: 'bob', email: 'bob@example.com', name: 'bob', role: 'User', createdAt: String, updatedAt: String }
    }, 'the local user comes from the token and userinfo, not from the header')
  }
  t.equal(await app.usersRepository.findBySubject('alice'), null, 'no local user was created for the header subject')
})
