import { count, eq } from 'drizzle-orm'
import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { messages, users } from '../../src/db/schema.js'
import { build } from '../helpers/build.js'
import { startTestIdp, type TestIdp, type UserinfoHandler } from '../helpers/idp.js'
import { bounded, NOT_HUNG_MS } from '../helpers/bounded.js'

// resolveLocalUser (SPEC 5.5, CONTRACT 4 and 10) through the routes that use it, with real tokens
// and a real userinfo endpoint on a loopback identity provider.

const AUDIENCE = 'backend-3-messages'
const UPSTREAM = { error: 'Failed to reach identity provider' }
const USERINFO = '/v2/oauth/userinfo'
const BOUND_MS = 15_000

async function me (app: App, token: string): Promise<LightMyRequestResponse> {
  return await bounded(app.inject({ method: 'GET', url: '/v2/users/me', headers: { authorization: `Bearer ${token}` } }), BOUND_MS)
}

async function postMessage (app: App, token: string, content: string): Promise<LightMyRequestResponse> {
  return await bounded(app.inject({ method: 'POST', url: '/v2/messages', headers: { authorization: `Bearer ${token}` }, payload: { content } }), BOUND_MS)
}

async function hello (app: App, token: string): Promise<LightMyRequestResponse> {
  return await bounded(app.inject({ method: 'GET', url: '/v2/hello', headers: { authorization: `Bearer ${token}` } }), BOUND_MS)
}

async function rowsOf (app: App, sub: string) {
  return await app.db.select().from(users).where(eq(users.subjectId, sub))
}

async function messageCount (app: App): Promise<number> {
  const [row] = await app.db.select({ n: count() }).from(messages)
  return row?.n ?? 0
}

interface Profile { email: string | null, name: string | null, role: string }

/** Checks a 200 local-user body against the expected profile and the row in the database; returns the body. */
async function assertLocalUser (t: Test, app: App, response: LightMyRequestResponse, sub: string, profile: Profile): Promise<Record<string, unknown>> {
  t.equal(response.statusCode, 200, 'status 200')
  t.equal(response.headers['cache-control'], 'private, no-cache', 'the users routes are private and revalidated (CONTRACT 12)')
  const body = response.json()
  t.match(body, { id: Number, createdAt: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/, updatedAt: /^\d{4}-\d\d-\d\dT/ })
  t.same(body, { id: body.id, subjectId: sub, email: profile.email, name: profile.name, role: profile.role, createdAt: body.createdAt, updatedAt: body.updatedAt })
  const rows = await rowsOf(app, sub)
  t.equal(rows.length, 1, 'exactly one row')
  t.same(rows.map((row) => ({ id: row.id, subjectId: row.subjectId, email: row.email, name: row.name, role: row.role })),
    [{ id: body.id, subjectId: sub, email: profile.email, name: profile.name, role: profile.role }])
  return body
}

function assertUpstreamFailure (t: Test, response: LightMyRequestResponse): void {
  t.equal(response.statusCode, 502, 'status 502')
  t.same(response.json(), UPSTREAM)
}

/** userinfo answering `profile` for whoever presents a valid token. */
const answering = (profile: Partial<Profile> & { sub?: string }): UserinfoHandler => ({ claims, defaultReply }) =>
  claims === undefined || defaultReply === 'reset' ? defaultReply : { status: 200, body: { ...(defaultReply.body as object), ...profile } }

t.test('resolveLocalUser', async (t) => {
  const idp: TestIdp = await startTestIdp(t, { audience: AUDIENCE })
  const app = await build(t, { config: { authIssuer: idp.url, apiAudience: AUDIENCE } })
  t.afterEach(() => {
    idp.userinfoHandler = undefined
    idp.setDown(false)
  })

  await t.test('first call: one userinfo call with the caller\'s token, a row from userinfo; second call: fast path', async (t) => {
    // userinfo differs from the token's claims, so the row shows where its data came from.
    const token = await idp.sign({ sub: 'carol', role: 'User', email: 'carol@token.example', name: 'Carol (token)' })
    idp.userinfoHandler = answering({ email: 'carol@idp.example', name: 'Carol Idp', role: 'Moderator' })
    const profile = { email: 'carol@idp.example', name: 'Carol Idp', role: 'Moderator' }

    const first = await assertLocalUser(t, app, await me(app, token), 'carol', profile)
    t.same(idp.requests.filter((request) => request.path === USERINFO), [{ method: 'GET', path: USERINFO, authorization: `Bearer ${token}` }])
    t.equal(idp.userinfoRequests, 1)

    const again = await assertLocalUser(t, app, await me(app, token), 'carol', profile)
    t.same(again, first, 'the same record')
    // A new token of the same subject also takes the fast path.
    const later = await idp.sign({ sub: 'carol', role: 'User', iat: Math.floor(Date.now() / 1000) - 1 })
    t.same(await assertLocalUser(t, app, await me(app, later), 'carol', profile), first)
    t.equal(idp.userinfoRequests, 1, 'no further userinfo call')
  })

  await t.test('20 concurrent first requests of a new subject: one userinfo call, one row', async (t) => {
    for (const [sub, delayMs] of [['dave', 200], ['erin', 0]] as const) {
      await t.test(`${sub}, userinfo answering after ${delayMs} ms`, async (t) => {
        idp.userinfoHandler = async ({ defaultReply }) => {
          await idp.wait(delayMs)
          return defaultReply
        }
        const before = idp.userinfoRequests
        const now = Math.floor(Date.now() / 1000)
        // Twenty distinct tokens of one subject.
        const tokens = await Promise.all(Array.from({ length: 20 }, async (_, i) => await idp.sign({ sub, role: 'User', iat: now - i })))
        const responses = await Promise.all(tokens.map(async (token) => await me(app, token)))
        const bodies = responses.map((response) => {
          t.equal(response.statusCode, 200)
          return response.json()
        })
        t.equal(idp.userinfoRequests - before, 1, 'exactly one userinfo call')
        const body = await assertLocalUser(t, app, responses[0]!, sub, { email: `${sub}@example.com`, name: sub, role: 'User' })
        for (const other of bodies) t.same(other, body)
      })
    }
  })

  await t.test('userinfo unreachable or failing: 502, nothing written; the next request after recovery succeeds', async (t) => {
    const failures: Array<[string, () => void]> = [
      ['answering 503', () => idp.setDown(true)],
      ['dropping the connection', () => idp.setDown(true, 'reset')],
      ['answering 500', () => { idp.userinfoHandler = () => ({ status: 500, body: { error: 'boom' } }) }],
      ['resetting only userinfo', () => { idp.userinfoHandler = () => 'reset' }],
      ['answering 401', () => { idp.userinfoHandler = () => ({ status: 401, body: { error: 'Invalid or missing token' } }) }],
      ['answering 200 with a body that is not JSON', () => { idp.userinfoHandler = () => ({ status: 200, body: '<html>hello</html>' }) }],
      ['answering 200 without sub', () => { idp.userinfoHandler = () => ({ status: 200, body: { email: 'x@example.com', name: 'X', role: 'User' } }) }],
      ['answering a different sub', () => { idp.userinfoHandler = answering({ sub: 'mallory' }) }]
    ]
    for (const [name, fail] of failures) {
      await t.test(name, async (t) => {
        const sub = `frank-${name.replaceAll(' ', '-')}`
        const token = await idp.sign({ sub, role: 'Admin', name: 'Frank' }, { omit: ['email'] })
        const messagesBefore = await messageCount(app)
        fail()
        assertUpstreamFailure(t, await me(app, token))
        assertUpstreamFailure(t, await postMessage(app, token, 'not written'))
        // The token has no email claim, so the greeting needs the local user too.
        assertUpstreamFailure(t, await hello(app, token))
        t.same(await rowsOf(app, sub), [], 'no row for the subject')
        t.same(await rowsOf(app, 'mallory'), [], 'no row for anyone else')
        t.equal(await messageCount(app), messagesBefore, 'no message written')

        idp.setDown(false)
        idp.userinfoHandler = undefined
        const before = idp.userinfoRequests
        await assertLocalUser(t, app, await me(app, token), sub, { email: `${sub}@example.com`, name: 'Frank', role: 'Admin' })
        t.equal(idp.userinfoRequests - before, 1)
      })
    }
  })

  await t.test('userinfo that never answers: 502 within the 5 s timeout, nothing written', async (t) => {
    const token = await idp.sign({ sub: 'gina', role: 'User' })
    idp.setDown(true, 'hang')
    const started = Date.now()
    assertUpstreamFailure(t, await me(app, token))
    const elapsed = Date.now() - started
    t.ok(elapsed < NOT_HUNG_MS, `answered after ${elapsed} ms`)
    t.same(await rowsOf(app, 'gina'), [])
    idp.setDown(false)
    await assertLocalUser(t, app, await me(app, token), 'gina', { email: 'gina@example.com', name: 'gina', role: 'User' })
  })

  await t.test('the role of a new local user: the userinfo role when known, else User', async (t) => {
    const cases: Array<[string, unknown, string]> = [
      ['hank', 'Root', 'User'],
      ['ivy', 'admin', 'User'],
      ['jack', null, 'User'],
      ['kate', 42, 'User'],
      ['liam', 'Owner', 'Owner'],
      ['mia', 'SuperAdmin', 'SuperAdmin']
    ]
    for (const [sub, userinfoRole, role] of cases) {
      idp.userinfoHandler = answering({ role: userinfoRole as string })
      // The token's role claim does not decide the stored role; userinfo does.
      const token = await idp.sign({ sub, role: 'Moderator' })
      await assertLocalUser(t, app, await me(app, token), sub, { email: `${sub}@example.com`, name: sub, role })
    }
  })

  await t.test('userinfo without email or name stores null', async (t) => {
    idp.userinfoHandler = () => ({ status: 200, body: { sub: 'noah', role: 'User' } })
    await assertLocalUser(t, app, await me(app, await idp.sign({ sub: 'noah' })), 'noah', { email: null, name: null, role: 'User' })
  })

  await t.test('a NUL or a lone surrogate in userinfo\'s name or email is stored as U+FFFD, never a 500 (CONTRACT 16)', async (t) => {
    idp.userinfoHandler = answering({ name: 'Pat\u0000ton \ud800', email: 'pat\udfff@idp.example' })
    const profile = { email: 'pat\ufffd@idp.example', name: 'Pat\ufffdton \ufffd', role: 'User' }
    const token = await idp.sign({ sub: 'patton', role: 'User' })
    await assertLocalUser(t, app, await me(app, token), 'patton', profile)
    const response = await postMessage(app, token, 'by patton')
    t.equal(response.statusCode, 201, 'and the person can write')
    t.same(response.json().author.name, profile.name)
    idp.userinfoHandler = answering({ name: 'Rain 🌧', email: 'rain@idp.example' })
    await assertLocalUser(t, app, await me(app, await idp.sign({ sub: 'rain', role: 'User' })), 'rain', { email: 'rain@idp.example', name: 'Rain 🌧', role: 'User' })
  })

  await t.test('POST /v2/messages by a new subject creates the user and links the message to it', async (t) => {
    idp.userinfoHandler = answering({ name: 'Olivia from userinfo', email: 'olivia@idp.example' })
    const token = await idp.sign({ sub: 'olivia', role: 'User', name: 'Olivia (token)' })
    const before = idp.userinfoRequests
    const response = await postMessage(app, token, 'hello from olivia')
    t.equal(response.statusCode, 201)
    const message = response.json()
    const [row] = await rowsOf(app, 'olivia')
    t.ok(row, 'the local user was created')
    t.match(message, { id: Number, createdAt: String })
    t.same(message, {
      id: message.id,
      content: 'hello from olivia',
      subject: null,
      priority: 'normal',
      author: { id: row?.id, name: 'Olivia from userinfo' },
      createdAt: message.createdAt
    })
    t.equal(idp.userinfoRequests - before, 1)
    // The same subject's record is the message's author, and it takes the fast path now.
    const user = await assertLocalUser(t, app, await me(app, token), 'olivia', { email: 'olivia@idp.example', name: 'Olivia from userinfo', role: 'User' })
    t.equal(user.id, message.author.id)
    const second = await postMessage(app, token, 'again')
    t.equal(second.statusCode, 201)
    t.same(second.json().author, { id: user.id, name: 'Olivia from userinfo' })
    t.equal(idp.userinfoRequests - before, 1, 'no further userinfo call')
    const stored = await app.inject({ method: 'GET', url: `/v2/messages/${message.id}` })
    t.equal(stored.statusCode, 200)
    t.same(stored.json(), message)
  })

  await t.test('GET /v2/hello without an email claim greets with the local user\'s email', async (t) => {
    idp.userinfoHandler = answering({ email: 'paul@idp.example', role: 'User' })
    const token = await idp.sign({ sub: 'paul', role: 'Admin' }, { omit: ['email'] })
    const before = idp.userinfoRequests
    const first = await hello(app, token)
    t.equal(first.statusCode, 200)
    t.same(first.json(), { message: 'Hello, paul@idp.example!', role: 'Admin' })
    t.equal(first.headers['cache-control'], 'no-store')
    t.equal(idp.userinfoRequests - before, 1)
    const second = await hello(app, token)
    t.equal(second.statusCode, 200)
    t.same(second.json(), { message: 'Hello, paul@idp.example!', role: 'Admin' })
    t.equal(idp.userinfoRequests - before, 1, 'the second greeting takes the fast path')
    // With an email claim, the greeting needs no local user at all.
    const withEmail = await hello(app, await idp.sign({ sub: 'quinn', role: 'Admin', email: 'quinn@token.example' }))
    t.equal(withEmail.statusCode, 200)
    t.same(withEmail.json(), { message: 'Hello, quinn@token.example!', role: 'Admin' })
    t.equal(idp.userinfoRequests - before, 1)
    t.same(await rowsOf(app, 'quinn'), [])
  })

  await t.test('an Admin sees exactly one row per subject in GET /v2/users', async (t) => {
    const admin = await idp.sign({ sub: 'root-admin', role: 'Admin' })
    const response = await app.inject({ method: 'GET', url: '/v2/users?limit=100', headers: { authorization: `Bearer ${admin}` } })
    t.equal(response.statusCode, 200)
    const subjects: string[] = response.json().data.map((user: { subjectId: string }) => user.subjectId)
    t.equal(new Set(subjects).size, subjects.length, 'no subject twice')
    t.equal(subjects.filter((sub) => sub === 'dave').length, 1)
    t.equal(subjects.filter((sub) => sub === 'erin').length, 1)
    t.notOk(subjects.includes('mallory'))
  })
})
