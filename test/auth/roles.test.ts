import t from 'tap'
import type { App } from '../../src/app.js'
import { DEFAULT_ROLE, hasRoleAtLeast, isRole, ROLES, roleRank, type Role } from '../../src/auth/roles.js'
import type { LocalUser } from '../../src/schemas/users.js'
import { build } from '../helpers/build.js'
import { createAuthor, createMessages } from '../helpers/fixtures.js'
import { pageBody } from '../helpers/pagination.js'
import { startTestIdp, type TestClaims } from '../helpers/idp.js'

const ORDER: Role[] = ['User', 'Moderator', 'Admin', 'SuperAdmin', 'Owner']
const UNAUTHORIZED = { error: 'Invalid or missing token' }
const FORBIDDEN = { error: 'Insufficient permissions' }
const AUDIENCE = 'backend-3-messages'

interface Reply { status: number, body: unknown }

async function call (app: App, method: 'GET' | 'POST' | 'DELETE', url: string, headers: Record<string, string> = {}, payload?: unknown): Promise<Reply> {
  const res = await app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as object }) })
  return { status: res.statusCode, body: res.body === '' ? '' : res.json() }
}

const stub = (sub: string, role?: string): Record<string, string> =>
  ({ 'x-test-user': JSON.stringify(role === undefined ? { sub } : { sub, role, email: `${sub}@example.com` }) })

t.test('src/auth/roles.ts', async (t) => {
  t.same(ROLES, ORDER, 'ROLES is the SPEC 2.4 order, lowest to highest')
  t.equal(DEFAULT_ROLE, 'User', 'a fresh account is a User')

  t.test('hasRoleAtLeast: every pair of the five roles', async (t) => {
    let cases = 0
    for (const [i, role] of ORDER.entries()) {
      for (const [j, minRole] of ORDER.entries()) {
        t.equal(hasRoleAtLeast(role, minRole), i >= j, `${role} ${i >= j ? 'passes' : 'fails'} the ${minRole} gate`)
        cases++
      }
    }
    t.equal(cases, 25, '25 pairs checked')
  })

  t.test('an unknown role fails every gate', async (t) => {
    for (const unknown of ['Root', 'user', 'ADMIN', 'owner', '', ' Admin', 'Admin ', 'constructor', '__proto__', 'toString']) {
      for (const minRole of ORDER) {
        t.equal(hasRoleAtLeast(unknown, minRole), false, `${JSON.stringify(unknown)} fails the ${minRole} gate`)
      }
      t.equal(roleRank(unknown), -1, `${JSON.stringify(unknown)} has rank -1`)
    }
  })

  t.test('roleRank', async (t) => {
    t.same(ORDER.map(roleRank), [0, 1, 2, 3, 4], 'ranks follow the hierarchy')
  })

  t.test('isRole', async (t) => {
    for (const role of ORDER) t.equal(isRole(role), true, `${role} is a role`)
    const notRoles: unknown[] = ['Root', 'user', 'admin', 'OWNER', '', ' User', 'User ', 'constructor', undefined, null, 0, 1, true, {}, ['Admin'], { role: 'Admin' }]
    for (const value of notRoles) t.equal(isRole(value), false, `${JSON.stringify(value) ?? String(value)} is not a role`)
  })
})

t.test('requireRole and requireRoleAtLeast on the real app (test stub)', async (t) => {
  const app = await build(t, { testAuth: true })
  // Probe routes on the real app, wired like the real routes: authentication on onRequest, the gate on preValidation.
  for (const role of ORDER) {
    app.get(`/probe/exactly/${role}`, { onRequest: app.authenticate, preValidation: app.requireRole(role) }, async (request) => ({ role: request.user!.role }))
    app.get(`/probe/at-least/${role}`, { onRequest: app.authenticate, preValidation: app.requireRoleAtLeast(role) }, async (request) => ({ role: request.user!.role }))
  }
  app.post('/probe/gated-body', {
    onRequest: app.authenticate,
    preValidation: app.requireRoleAtLeast('Admin'),
    schema: { body: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } } }
  }, async () => ({ ok: true }))
  // A gate without the authentication chain in front: there is no user, and the safe answer is 401.
  app.get('/probe/unauthenticated-gate', { preValidation: app.requireRoleAtLeast('User') }, async () => ({ ok: true }))

  t.test('requireRole(role) passes only the exact role', async (t) => {
    for (const gate of ORDER) {
      for (const caller of [...ORDER, 'Root']) {
        const expected = caller === gate ? { status: 200, body: { role: caller } } : { status: 403, body: FORBIDDEN }
        t.same(await call(app, 'GET', `/probe/exactly/${gate}`, stub(`s-${caller}`, caller)), expected, `requireRole(${gate}) as ${caller}: ${expected.status}`)
      }
      t.same(await call(app, 'GET', `/probe/exactly/${gate}`, stub('no-role')), gate === 'User' ? { status: 200, body: { role: 'User' } } : { status: 403, body: FORBIDDEN },
        `requireRole(${gate}) with no role claim: the caller is a User`)
      t.same(await call(app, 'GET', `/probe/exactly/${gate}`), { status: 401, body: UNAUTHORIZED }, `requireRole(${gate}) without a caller: 401, never 403`)
    }
  })

  t.test('requireRoleAtLeast(minRole) passes that role and every role above it', async (t) => {
    for (const [j, gate] of ORDER.entries()) {
      for (const [i, caller] of ORDER.entries()) {
        const expected = i >= j ? { status: 200, body: { role: caller } } : { status: 403, body: FORBIDDEN }
        t.same(await call(app, 'GET', `/probe/at-least/${gate}`, stub(`s-${caller}`, caller)), expected, `requireRoleAtLeast(${gate}) as ${caller}: ${expected.status}`)
      }
      t.same(await call(app, 'GET', `/probe/at-least/${gate}`, stub('root', 'Root')), { status: 403, body: FORBIDDEN }, `requireRoleAtLeast(${gate}) as an unknown role: 403`)
      t.same(await call(app, 'GET', `/probe/at-least/${gate}`), { status: 401, body: UNAUTHORIZED }, `requireRoleAtLeast(${gate}) without a caller: 401, never 403`)
    }
  })

  t.test('the gate runs before body validation', async (t) => {
    t.same(await call(app, 'POST', '/probe/gated-body', stub('u', 'User'), { n: 'not a number' }), { status: 403, body: FORBIDDEN }, 'a refused caller with an invalid body: 403, not 400')
    t.same(await call(app, 'POST', '/probe/gated-body', stub('a', 'Admin'), { n: 'not a number' }), { status: 400, body: { error: 'Validation failed', details: ['n must be a number'] } },
      'an admitted caller with the same body: 400')
    t.same(await call(app, 'POST', '/probe/gated-body', stub('a', 'Admin'), { n: 1 }), { status: 200, body: { ok: true } }, 'an admitted caller with a valid body: 200')
    t.same(await call(app, 'POST', '/probe/gated-body', {}, { n: 'not a number' }), { status: 401, body: UNAUTHORIZED }, 'no caller with an invalid body: 401')
  })

  t.test('a gate reached without authentication answers 401', async (t) => {
    t.same(await call(app, 'GET', '/probe/unauthenticated-gate', stub('o', 'Owner')), { status: 401, body: UNAUTHORIZED }, 'request.user is null: 401')
  })

  t.test('the real routes use requireRoleAtLeast(Admin)', async (t) => {
    for (const caller of [...ORDER, 'Root']) {
      const allowed = hasRoleAtLeast(caller, 'Admin')
      t.same(await call(app, 'GET', '/v2/hello', stub(`h-${caller}`, caller)),
        allowed ? { status: 200, body: { message: `Hello, h-${caller}@example.com!`, role: caller } } : { status: 403, body: FORBIDDEN },
        `GET /v2/hello as ${caller}`)
    }
  })
})

interface Caller { label: string, sub: string, claims: TestClaims, omitRole: boolean, rank: number, storedRole: Role }

t.test('role × route matrix with real RS256 tokens', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const app = await build(t, { config: { authIssuer: idp.url, apiAudience: AUDIENCE } })

  const callers: Caller[] = [
    ...ORDER.map((role, rank): Caller => ({ label: role, sub: `caller-${role.toLowerCase()}`, claims: { role }, omitRole: false, rank, storedRole: role })),
    { label: 'Root (unknown)', sub: 'caller-root', claims: { role: 'Root' }, omitRole: false, rank: -1, storedRole: 'User' },
    { label: 'no role claim', sub: 'caller-norole', claims: {}, omitRole: true, rank: 0, storedRole: 'User' }
  ]
  const tokens = new Map<string, string>()
  for (const caller of callers) {
    tokens.set(caller.sub, await idp.sign({ sub: caller.sub, ...caller.claims }, caller.omitRole ? { omit: ['role'] } : {}))
  }
  const bearer = (caller: Caller): Record<string, string> => ({ authorization: `Bearer ${tokens.get(caller.sub)!}` })
  const roleClaim = (caller: Caller): string => caller.omitRole ? 'User' : String(caller.claims.role)

  // Someone else's messages: one per caller, so every DELETE has its own target.
  const author = await createAuthor(app, 'someone-else', { name: 'Someone Else' })
  const targets = await createMessages(app, author.id, callers.length, (i) => ({ content: `target ${i}` }))

  // Phase 1: GET /v2/users/me for everyone, so the local user table is known before the list is read.
  const locals: LocalUser[] = []
  for (const caller of callers) {
    const { status, body } = await call(app, 'GET', '/v2/users/me', bearer(caller))
    t.match({ status, body }, {
      status: 200,
      body: { id: Number, subjectId: caller.sub, email: `${caller.sub}@example.com`, name: caller.sub, role: caller.storedRole, createdAt: String, updatedAt: String }
    }, `GET /v2/users/me as ${caller.label}: 200, provisioned from userinfo`)
    t.same(Object.keys(body as object).sort(), ['createdAt', 'email', 'id', 'name', 'role', 'subjectId', 'updatedAt'], `GET /v2/users/me as ${caller.label}: exactly the user item`)
    locals.push(body as LocalUser)
  }
  const allUsers = [author, ...locals]
  const usersPage = pageBody(allUsers, 1, 25, allUsers.length)

  for (const [i, caller] of callers.entries()) {
    const headers = bearer(caller)
    const admin = caller.rank >= 2
    const moderator = caller.rank >= 1

    t.same(await call(app, 'GET', '/v2/hello', headers),
      admin ? { status: 200, body: { message: `Hello, ${caller.sub}@example.com!`, role: roleClaim(caller) } } : { status: 403, body: FORBIDDEN },
      `GET /v2/hello as ${caller.label}: ${admin ? 200 : 403}`)

    t.same(await call(app, 'GET', '/v2/users', headers),
      admin ? { status: 200, body: usersPage } : { status: 403, body: FORBIDDEN },
      `GET /v2/users as ${caller.label}: ${admin ? 200 : 403}`)

    t.same(await call(app, 'GET', '/v2/users?role=Nope', headers),
      admin
        ? { status: 400, body: { error: 'Validation failed', details: ['role must be one of User, Moderator, Admin, SuperAdmin, Owner'] } }
        : { status: 403, body: FORBIDDEN },
      `GET /v2/users?role=Nope as ${caller.label}: ${admin ? '400' : '403 before query validation'}`)

    const me = locals[i]!
    {
      const res = await app.inject({ method: 'POST', url: '/v2/messages', headers, payload: { content: `by ${caller.sub}` } })
      const body = res.json()
      t.match({ status: res.statusCode, body }, {
        status: 201,
        body: { id: Number, content: `by ${caller.sub}`, subject: null, priority: 'normal', author: { id: me.id, name: caller.sub }, createdAt: String }
      }, `POST /v2/messages as ${caller.label}: 201`)
      t.equal(res.headers.location, `/v2/messages/${String(body.id)}`, `POST /v2/messages as ${caller.label}: Location`)
    }

    const target = targets[i]!
    t.same(await call(app, 'DELETE', `/v2/messages/${target.id}`, headers),
      moderator ? { status: 204, body: '' } : { status: 403, body: FORBIDDEN },
      `DELETE someone else's message as ${caller.label}: ${moderator ? 204 : 403}`)
    t.same(await call(app, 'GET', `/v2/messages/${target.id}`),
      moderator ? { status: 404, body: { error: 'Message not found' } } : { status: 200, body: target },
      `after DELETE as ${caller.label}: the message is ${moderator ? 'gone' : 'still there'}`)
  }

  t.test('a missing or invalid token is 401 on every protected route, never 403', async (t) => {
    const adminCaller = callers[2]!
    const wrongAudience = await idp.sign({ sub: 'caller-admin', role: 'Owner' }, { aud: 'another-api' })
    const expired = await idp.sign({ sub: 'caller-admin', role: 'Owner' }, { expiresIn: -3600 })
    const foreign = await idp.sign({ sub: 'caller-admin', role: 'Owner' }, { key: 'foreign' })
    const credentials: Array<[string, Record<string, string>]> = [
      ['no Authorization header', {}],
      ['a malformed token', { authorization: 'Bearer not-a-jwt' }],
      ['a wrong-audience Owner token', { authorization: `Bearer ${wrongAudience}` }],
      ['an expired Owner token', { authorization: `Bearer ${expired}` }],
      ['an Owner token signed by a foreign key', { authorization: `Bearer ${foreign}` }],
      ['a Basic scheme', { authorization: 'Basic YWxpY2U6c2VjcmV0' }],
      ['an x-test-user Owner header only', stub('caller-admin', 'Owner')]
    ]
    const routes: Array<['GET' | 'POST' | 'DELETE', string, unknown]> = [
      ['GET', '/v2/hello', undefined],
      ['GET', '/v2/users', undefined],
      ['GET', '/v2/users?role=Nope', undefined],
      ['GET', '/v2/users/me', undefined],
      ['GET', `/v2/users/${locals[2]!.id}`, undefined],
      ['GET', '/v2/users/abc', undefined],
      ['POST', '/v2/messages', { content: 'hello' }],
      ['POST', '/v2/messages', { content: '' }],
      ['DELETE', `/v2/messages/${targets[0]!.id}`, undefined],
      ['DELETE', '/v2/messages/abc', undefined]
    ]
    for (const [label, headers] of credentials) {
      for (const [method, url, payload] of routes) {
        t.same(await call(app, method, url, headers, payload), { status: 401, body: UNAUTHORIZED }, `${method} ${url} with ${label}: 401`)
      }
    }
    t.same(await call(app, 'GET', '/v2/hello', bearer(adminCaller)), { status: 200, body: { message: 'Hello, caller-admin@example.com!', role: 'Admin' } },
      'sanity: the valid Admin token still works')
  })
})
