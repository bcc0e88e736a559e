import { randomUUID } from 'node:crypto'
import { Writable } from 'node:stream'
import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { build } from '../helpers/build.js'
import { startRecorder, startTestIdp, type TestIdp } from '../helpers/idp.js'
import { bounded, NOT_HUNG_MS } from '../helpers/bounded.js'

// The real RS256 path end to end: the app verifies tokens against a loopback identity provider
// (test/helpers/idp.ts) exactly as it would against the production one. No testAuth anywhere.

const AUDIENCE = 'backend-3-messages'
const UNAUTHORIZED = { error: 'Invalid or missing token' }
const FORBIDDEN = { error: 'Insufficient permissions' }
const ADMIN = { sub: 'alice', role: 'Admin', email: 'alice@example.com', name: 'Alice' }
const BOUND_MS = 10_000

const sleep = async (ms: number): Promise<void> => await new Promise((resolve) => setTimeout(resolve, ms))

async function appFor (t: Test, idp: TestIdp, over: Parameters<typeof build>[1] = {}): Promise<App> {
  return await build(t, { ...over, config: { authIssuer: idp.url, apiAudience: AUDIENCE, ...over.config } })
}

const headers = (authorization: string | undefined): Record<string, string> =>
  authorization === undefined ? {} : { authorization }

async function hello (app: App, authorization?: string): Promise<LightMyRequestResponse> {
  return await bounded(app.inject({ method: 'GET', url: '/v2/hello', headers: headers(authorization) }), BOUND_MS)
}

async function postMessage (app: App, authorization?: string, content = 'hi there'): Promise<LightMyRequestResponse> {
  return await bounded(app.inject({ method: 'POST', url: '/v2/messages', headers: headers(authorization), payload: { content } }), BOUND_MS)
}

const bearer = (token: string): string => `Bearer ${token}`

function assertUnauthorized (t: Test, response: LightMyRequestResponse, presented: boolean): void {
  t.equal(response.statusCode, 401, 'status 401')
  t.same(response.json(), UNAUTHORIZED)
  t.equal(response.headers['www-authenticate'], presented ? 'Bearer error="invalid_token"' : 'Bearer')
}

function assertHello (t: Test, response: LightMyRequestResponse, email: string, role: string): void {
  t.equal(response.statusCode, 200, 'status 200')
  t.same(response.json(), { message: `Hello, ${email}!`, role })
  t.equal(response.headers['cache-control'], 'no-store')
}

function assertCreated (t: Test, response: LightMyRequestResponse, content: string, authorName: string | null): void {
  t.equal(response.statusCode, 201, 'status 201')
  const body = response.json()
  t.match(body, { id: Number, createdAt: String, author: { id: Number } })
  t.same(body, { id: body.id, content, subject: null, priority: 'normal', author: { id: body.author.id, name: authorName }, createdAt: body.createdAt })
  t.equal(response.headers.location, `/v2/messages/${body.id}`)
  t.equal(response.headers['cache-control'], 'no-store')
}

function assertForbidden (t: Test, response: LightMyRequestResponse): void {
  t.equal(response.statusCode, 403, 'status 403')
  t.same(response.json(), FORBIDDEN)
  t.equal(response.headers['www-authenticate'], undefined)
}

/** Waits (at most a second) until the wall clock is just past a whole second, so integer exp/nbf are predictable. */
async function alignToSecond (): Promise<void> {
  const into = Date.now() % 1000
  if (into > 100) await sleep(1010 - into)
}

/** Re-encodes the payload of a signed token without re-signing it. */
function tamper (token: string, claims: Record<string, unknown>): string {
  const [header, payload, signature] = token.split('.') as [string, string, string]
  const changed = { ...JSON.parse(Buffer.from(payload, 'base64url').toString()), ...claims }
  return `${header}.${Buffer.from(JSON.stringify(changed)).toString('base64url')}.${signature}`
}

const randomKid = (): string => randomUUID()

/** Asks again every 100 ms until `done` holds; fails after NOT_HUNG_MS, far beyond what any machine needs. */
async function eventually (what: string, done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + NOT_HUNG_MS
  while (!await done()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${NOT_HUNG_MS} ms`)
    await sleep(100)
  }
}

// One provider and one app for the claim checks; the key-set tests below each get a fresh app,
// because the key set and its 30 s window are per app. Their timing rules, on a clock the test
// drives, are in test/auth/jwks.test.ts; here they are seen through the app.
t.test('token verification', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  // Everything this app logs, at trace level and without the production redaction, is checked for tokens at the end.
  const lines: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, callback) {
      lines.push(chunk.toString())
      callback()
    }
  })
  const app = await appFor(t, idp, { logger: { level: 'trace', stream } })
  const issued: string[] = []
  const sign: TestIdp['sign'] = async (claims, options) => {
    const token = await idp.sign(claims, options)
    issued.push(token)
    return token
  }

  await t.test('valid Admin tokens are accepted, and the key set is fetched once for all of them', async (t) => {
    const token = await sign(ADMIN)
    assertHello(t, await hello(app, bearer(token)), 'alice@example.com', 'Admin')
    assertCreated(t, await postMessage(app, bearer(token), 'first'), 'first', 'Alice')
    const tokens = await Promise.all(Array.from({ length: 10 }, async (_, i) => await sign({ ...ADMIN, email: `a${i}@example.com` })))
    const responses = await Promise.all(tokens.map(async (token) => await hello(app, bearer(token))))
    responses.forEach((response, i) => assertHello(t, response, `a${i}@example.com`, 'Admin'))
    for (const [i, token] of tokens.entries()) assertHello(t, await hello(app, bearer(token)), `a${i}@example.com`, 'Admin')
    t.equal(idp.jwksRequests, 1)
  })

  await t.test('every malformed or unverifiable token is 401 on both routes', async (t) => {
    const valid = await sign(ADMIN)
    const now = Math.floor(Date.now() / 1000)
    const cases: Array<[string, string | undefined]> = [
      ['no Authorization header', undefined],
      ['Bearer alone', 'Bearer'],
      ['Bearer and a space', 'Bearer '],
      ['Bearer with two spaces before the token', `Bearer  ${valid}`],
      ['Bearer with a trailing space', `Bearer ${valid} `],
      ['token without scheme', valid],
      ['Basic credentials', 'Basic dXNlcjpwYXNz'],
      ['garbage', 'Bearer not-a-jwt'],
      ['three garbage segments', 'Bearer aaa.bbb.ccc'],
      ['bad signature: a foreign key with the kid of a real key', bearer(await sign(ADMIN, { key: 'foreign', kid: idp.currentKid }))],
      ['tampered payload', bearer(tamper(valid, { role: 'Owner' }))],
      ['expired beyond the 5 s tolerance', bearer(await sign(ADMIN, { expiresIn: -7 }))],
      ['expired an hour ago', bearer(await sign({ ...ADMIN, iat: now - 7200 }))],
      ['nbf 60 s ahead', bearer(await sign(ADMIN, { notBefore: 60 }))],
      ['wrong aud', bearer(await sign(ADMIN, { aud: 'another-api' }))],
      ['aud array without the audience', bearer(await sign(ADMIN, { aud: ['another-api', 'third-api'] }))],
      ['wrong iss', bearer(await sign(ADMIN, { iss: 'http://evil.example' }))],
      ['iss with a path appended', bearer(await sign(ADMIN, { iss: `${idp.url}/other` }))],
      ['iss with two trailing slashes', bearer(await sign(ADMIN, { iss: `${idp.url}//` }))],
      ['missing sub', bearer(await sign(ADMIN, { omit: ['sub'] }))],
      ['empty sub', bearer(await sign({ ...ADMIN, sub: '' }))],
      // CONTRACT 16: a subject PostgreSQL cannot store as sent names no local user.
      ['sub holding a NUL', bearer(await sign({ ...ADMIN, sub: 'alice\u0000' }))],
      ['sub holding a lone surrogate', bearer(await sign({ ...ADMIN, sub: 'alice\ud800' }))],
      ['missing exp', bearer(await sign(ADMIN, { omit: ['exp'] }))],
      ['missing aud', bearer(await sign(ADMIN, { omit: ['aud'] }))],
      ['missing iss', bearer(await sign(ADMIN, { omit: ['iss'] }))],
      ['alg none', bearer(await sign(ADMIN, { alg: 'none' }))],
      ['HS256 signed with the public key PEM as secret', bearer(await sign(ADMIN, { hs256WithPublicKey: true }))],
      ['HS256 with an arbitrary secret', bearer(await sign(ADMIN, { hmacSecret: 'secret' }))],
      ['RS384', bearer(await sign(ADMIN, { alg: 'RS384' }))],
      ['RS512', bearer(await sign(ADMIN, { alg: 'RS512' }))],
      ['PS256', bearer(await sign(ADMIN, { alg: 'PS256' }))]
    ]
    const jwksBefore = idp.jwksRequests
    const userinfoBefore = idp.userinfoRequests
    for (const [name, authorization] of cases) {
      await t.test(name, async (t) => {
        // RFC 6750 3.1: invalid_token only when a bearer token was presented at all.
        const presented = authorization !== undefined && /^Bearer\s+\S/i.test(authorization)
        assertUnauthorized(t, await hello(app, authorization), presented)
        assertUnauthorized(t, await postMessage(app, authorization), presented)
      })
    }
    t.equal(idp.jwksRequests, jwksBefore, 'no case fetched the key set again')
    t.equal(idp.userinfoRequests, userinfoBefore, 'no case reached userinfo')
  })

  await t.test('tokens inside the 5 s clock tolerance are accepted', async (t) => {
    await alignToSecond()
    // exp 3 s ago and nbf 3 s ahead are both within the tolerance (CONTRACT 10).
    assertHello(t, await hello(app, bearer(await sign(ADMIN, { expiresIn: -3 }))), 'alice@example.com', 'Admin')
    assertHello(t, await hello(app, bearer(await sign(ADMIN, { notBefore: 3 }))), 'alice@example.com', 'Admin')
  })

  await t.test('iss with a trailing slash is accepted (CONTRACT 2)', async (t) => {
    assertHello(t, await hello(app, bearer(await sign(ADMIN, { iss: `${idp.url}/` }))), 'alice@example.com', 'Admin')
  })

  await t.test('aud as an array that contains the audience is accepted', async (t) => {
    assertHello(t, await hello(app, bearer(await sign(ADMIN, { aud: ['another-api', AUDIENCE] }))), 'alice@example.com', 'Admin')
  })

  await t.test('the scheme is case-insensitive', async (t) => {
    const token = await sign(ADMIN)
    assertHello(t, await hello(app, `bearer ${token}`), 'alice@example.com', 'Admin')
    assertHello(t, await hello(app, `BEARER ${token}`), 'alice@example.com', 'Admin')
    assertCreated(t, await postMessage(app, `bearer ${token}`, 'lower-case scheme'), 'lower-case scheme', 'Alice')
  })

  await t.test('a missing role claim is User: 403 on the Admin gate, 201 on POST /v2/messages', async (t) => {
    const token = await sign({ sub: 'norole' }, { omit: ['role'] })
    assertForbidden(t, await hello(app, bearer(token)))
    assertCreated(t, await postMessage(app, bearer(token), 'no role'), 'no role', 'norole')
  })

  await t.test('an unknown role authenticates but fails every gate', async (t) => {
    const token = await sign({ sub: 'root', role: 'Root', name: 'Root' })
    assertForbidden(t, await hello(app, bearer(token)))
    assertCreated(t, await postMessage(app, bearer(token), 'root was here'), 'root was here', 'Root')
    // Role names are case-sensitive.
    assertForbidden(t, await hello(app, bearer(await sign({ sub: 'lower', role: 'admin' }))))
  })

  await t.test('the role gate of GET /v2/hello: User and Moderator 403; SuperAdmin and Owner 200', async (t) => {
    assertForbidden(t, await hello(app, bearer(await sign({ sub: 'u', role: 'User' }))))
    assertForbidden(t, await hello(app, bearer(await sign({ sub: 'm', role: 'Moderator' }))))
    assertHello(t, await hello(app, bearer(await sign({ sub: 's', role: 'SuperAdmin' }))), 's@example.com', 'SuperAdmin')
    assertHello(t, await hello(app, bearer(await sign({ sub: 'o', role: 'Owner' }))), 'o@example.com', 'Owner')
  })

  await t.test('the verified-token cache keeps expiry to the second', async (t) => {
    await alignToSecond()
    const token = await sign(ADMIN, { expiresIn: -4 })
    assertHello(t, await hello(app, bearer(token)), 'alice@example.com', 'Admin')
    assertHello(t, await hello(app, bearer(token)), 'alice@example.com', 'Admin')
    // 1.5 s later the token is more than 5 s past exp: a cached verification must not outlive it.
    await sleep(1500)
    assertUnauthorized(t, await hello(app, bearer(token)), true)
    assertUnauthorized(t, await postMessage(app, bearer(token)), true)
  })

  // Last in this app: the unknown kids below open its 30 s window.
  await t.test('no address taken from a token is ever contacted (iss, jku, x5u)', async (t) => {
    const recorder = await startRecorder(t)
    const evil = { jku: `${recorder.url}/.well-known/jwks.json`, x5u: `${recorder.url}/cert.pem` }
    const tokens = [
      // Signed by the real key, but issued "by" the recorder.
      await sign(ADMIN, { iss: recorder.url, header: evil }),
      await sign(ADMIN, { iss: `${recorder.url}/`, header: evil }),
      // Foreign keys with kids unknown everywhere: the only key set ever asked is the issuer's.
      await sign(ADMIN, { iss: recorder.url, key: 'foreign', kid: randomKid(), header: evil }),
      await sign(ADMIN, { iss: recorder.url, key: 'foreign', kid: null, header: evil }),
      await sign(ADMIN, { key: 'foreign', kid: randomKid(), header: evil })
    ]
    for (const token of tokens) {
      assertUnauthorized(t, await hello(app, bearer(token)), true)
      assertUnauthorized(t, await postMessage(app, bearer(token)), true)
    }
    // A valid token carrying jku/x5u is verified with the issuer's key; the headers are ignored.
    const valid = await sign(ADMIN, { header: evil })
    assertHello(t, await hello(app, bearer(valid)), 'alice@example.com', 'Admin')
    assertCreated(t, await postMessage(app, bearer(valid), 'jku ignored'), 'jku ignored', 'Alice')
    t.equal(recorder.count, 0, 'the recorder received no request')
    t.same(recorder.requests, [])
    t.ok(idp.requests.every((request) => ['/.well-known/jwks.json', '/v2/oauth/userinfo'].includes(request.path)))
  })

  // Last: the requests above, plus a userinfo failure, have all been logged.
  await t.test('tokens never reach the logs', async (t) => {
    const newcomer = await sign({ sub: 'newcomer', role: 'User' })
    assertForbidden(t, await hello(app, bearer(newcomer)))
    assertCreated(t, await postMessage(app, bearer(newcomer), 'from a newcomer'), 'from a newcomer', 'newcomer')
    idp.setDown(true)
    const outage = await sign({ sub: 'during-outage', role: 'User' })
    const failed = await postMessage(app, bearer(outage))
    t.equal(failed.statusCode, 502)
    t.same(failed.json(), { error: 'Failed to reach identity provider' })
    idp.setDown(false)

    const output = lines.join('')
    t.ok(output.includes('"msg":"request"') && output.includes('"route":"/v2/hello'), 'requests were logged, one line each, with their route')
    t.ok(output.includes('authentication failed'), 'failures were logged')
    t.ok(issued.length > 50, `${issued.length} tokens were presented`)
    for (const token of issued) {
      t.notOk(output.includes(token), 'the token is not in the logs')
      t.notOk(output.includes(`Bearer ${token}`), 'the Authorization value is not in the logs')
      const signature = token.split('.')[2] ?? ''
      if (signature !== '') t.notOk(output.includes(signature), 'not even its signature is in the logs')
    }
    t.notMatch(output, /eyJ[\w-]+\.eyJ/, 'nothing that looks like a JWT is in the logs')
    t.notMatch(output, /bearer [\w-]+\./i, 'no bearer credential is in the logs')
  })
})

t.test('key set: one fetch for the whole set, the 30 s window, a flood of unknown kids and an outage', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const firstKid = idp.currentKid
  const secondKid = await idp.rotate()
  const app = await appFor(t, idp)

  await t.test('tokens of either key are accepted, after one fetch for both', async (t) => {
    assertHello(t, await hello(app, bearer(await idp.sign(ADMIN, { key: secondKid }))), 'alice@example.com', 'Admin')
    assertHello(t, await hello(app, bearer(await idp.sign({ ...ADMIN, email: 'first@example.com' }, { key: firstKid }))), 'first@example.com', 'Admin')
    assertCreated(t, await postMessage(app, bearer(await idp.sign(ADMIN, { key: firstKid })), 'either key'), 'either key', 'Alice')
    t.equal(idp.jwksRequests, 1)
  })

  await t.test('a key published after that fetch is refused without another fetch while the 30 s window holds', async (t) => {
    await idp.rotate()
    const fresh = await idp.sign(ADMIN)
    assertUnauthorized(t, await hello(app, bearer(fresh)), true)
    assertUnauthorized(t, await postMessage(app, bearer(fresh)), true)
    t.equal(idp.jwksRequests, 1)
  })

  await t.test('50 tokens with random kids: 401 each, no fetch inside the window, real keys not locked out', async (t) => {
    const before = idp.jwksRequests
    // The first foreign token creates the foreign key; signing the rest concurrently then reuses it.
    const flood = [await idp.sign(ADMIN, { key: 'foreign', kid: randomKid() })]
    flood.push(...await Promise.all(Array.from({ length: 49 }, async () => await idp.sign(ADMIN, { key: 'foreign', kid: randomKid() }))))
    const responses = await Promise.all(flood.map(async (token) => await hello(app, bearer(token))))
    for (const response of responses) assertUnauthorized(t, response, true)
    for (const token of flood.slice(0, 5)) assertUnauthorized(t, await postMessage(app, bearer(token)), true)
    t.equal(idp.jwksRequests, before, 'no fetch for 55 unknown kids')
    assertHello(t, await hello(app, bearer(await idp.sign({ ...ADMIN, email: 'still@example.com' }, { key: secondKid }))), 'still@example.com', 'Admin')
  })

  await t.test('while the key set is down, cached kids keep working and a new kid is 401, not 500', async (t) => {
    idp.setDown(true)
    const before = idp.jwksRequests
    assertHello(t, await hello(app, bearer(await idp.sign({ ...ADMIN, email: 'down@example.com' }, { key: firstKid }))), 'down@example.com', 'Admin')
    assertHello(t, await hello(app, bearer(await idp.sign({ ...ADMIN, email: 'down2@example.com' }, { key: secondKid }))), 'down2@example.com', 'Admin')
    t.equal(idp.jwksRequests, before, 'no fetch for cached kids')
    await idp.rotate()
    const fresh = await idp.sign(ADMIN)
    assertUnauthorized(t, await hello(app, bearer(fresh)), true)
    assertUnauthorized(t, await postMessage(app, bearer(fresh)), true)
    idp.setDown(false)
  })
})

t.test('key set: failing or hanging on the first fetch is 401, not 500, and the key is accepted once it answers', async (t) => {
  const failures: Array<[string, (idp: TestIdp) => void]> = [
    ['a 500', (idp) => { idp.jwksHandler = () => ({ status: 500, body: { error: 'boom' } }) }],
    ['a 500 that is not JSON', (idp) => { idp.jwksHandler = () => ({ status: 500, body: '<html>not json</html>' }) }],
    ['a 200 that is not a key set', (idp) => { idp.jwksHandler = () => ({ status: 200, body: { keys: 'k1' } }) }],
    ['no answer at all, within the 5 s timeout', (idp) => idp.setDown(true, 'hang')]
  ]
  for (const [name, fail] of failures) {
    await t.test(name, async (t) => {
      const idp = await startTestIdp(t, { audience: AUDIENCE })
      // Configured with a trailing slash: the key set is still fetched from the issuer, and iss matches either way.
      const app = await build(t, { config: { authIssuer: `${idp.url}/`, apiAudience: AUDIENCE } })
      fail(idp)
      const started = Date.now()
      assertUnauthorized(t, await hello(app, bearer(await idp.sign(ADMIN))), true)
      const elapsed = Date.now() - started
      t.ok(elapsed < NOT_HUNG_MS, `answered after ${elapsed} ms`)
      t.ok(idp.jwksRequests >= 1, 'the key set was asked')
      assertUnauthorized(t, await postMessage(app, bearer(await idp.sign(ADMIN))), true)
      idp.setDown(false)
      idp.jwksHandler = undefined
      const token = await idp.sign(ADMIN)
      await eventually('accepted once the key set answers', async () => (await hello(app, bearer(token))).statusCode === 200)
      assertHello(t, await hello(app, bearer(await idp.sign(ADMIN, { iss: `${idp.url}/` }))), 'alice@example.com', 'Admin')
      assertCreated(t, await postMessage(app, bearer(token), 'after the failure'), 'after the failure', 'Alice')
      t.same(idp.requests.filter((request) => request.path !== '/.well-known/jwks.json' && request.path !== '/v2/oauth/userinfo'), [], 'only the issuer\'s key set and userinfo were asked')
    })
  }
})

// The one test on the real clock: with JWKS_MAX_AGE_S=1 the app fetches the key set again about every
// second, so what the key set does shows within seconds. Only outcomes are awaited, never durations.
t.test('key set in real time (JWKS_MAX_AGE_S=1): removal, rotation, tokens without kid, an outage', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const app = await appFor(t, idp, { config: { jwksMaxAgeS: 1 } })
  const status = async (token: string): Promise<number> => (await hello(app, bearer(token))).statusCode

  await t.test('a key removed from the set is refused, and so is every token it verified before', async (t) => {
    const removedKid = idp.currentKid
    const keptKid = await idp.rotate()
    const seen = await idp.sign(ADMIN, { key: removedKid })
    const unseen = await idp.sign({ ...ADMIN, email: 'unseen@example.com' }, { key: removedKid })
    const kept = await idp.sign({ ...ADMIN, email: 'kept@example.com' }, { key: keptKid })
    assertHello(t, await hello(app, bearer(seen)), 'alice@example.com', 'Admin')
    assertHello(t, await hello(app, bearer(seen)), 'alice@example.com', 'Admin')
    assertHello(t, await hello(app, bearer(kept)), 'kept@example.com', 'Admin')
    idp.removeKey(removedKid)
    await eventually('the removed key is refused', async () => await status(seen) === 401)
    assertUnauthorized(t, await hello(app, bearer(seen)), true)
    assertUnauthorized(t, await postMessage(app, bearer(seen)), true)
    assertUnauthorized(t, await hello(app, bearer(unseen)), true)
    assertHello(t, await hello(app, bearer(kept)), 'kept@example.com', 'Admin')
    // Later fetches never bring it back.
    const fetched = idp.jwksRequests
    await eventually('two more fetches', async () => await status(kept) === 200 && idp.jwksRequests >= fetched + 2)
    assertUnauthorized(t, await hello(app, bearer(seen)), true)
  })

  await t.test('a newly published key is accepted once the set is fetched again', async (t) => {
    const token = await idp.sign({ ...ADMIN, email: 'new@example.com' }, { key: await idp.rotate() })
    await eventually('the new key is accepted', async () => await status(token) === 200)
    assertHello(t, await hello(app, bearer(token)), 'new@example.com', 'Admin')
    assertCreated(t, await postMessage(app, bearer(token), 'new key'), 'new key', 'Alice')
  })

  await t.test('a token without kid is accepted only while the set holds exactly one key', async (t) => {
    const withoutKid = await idp.sign(ADMIN, { kid: null })
    assertUnauthorized(t, await hello(app, bearer(withoutKid)), true)
    idp.removeKey(idp.kids[0]!)
    t.equal(idp.kids.length, 1)
    await eventually('accepted once the set holds one key', async () => await status(withoutKid) === 200)
    assertCreated(t, await postMessage(app, bearer(withoutKid), 'no kid'), 'no kid', 'Alice')
    const added = await idp.sign({ ...ADMIN, email: 'added@example.com' }, { key: await idp.rotate() })
    // The same token, remembered as verified, is retired when the set holds two keys.
    await eventually('refused once the set holds two keys', async () => await status(withoutKid) === 401)
    assertUnauthorized(t, await postMessage(app, bearer(withoutKid)), true)
    assertHello(t, await hello(app, bearer(added)), 'added@example.com', 'Admin')
  })

  await t.test('the provider down: refused once the cached set is too old, accepted again when it is back', async (t) => {
    const token = await idp.sign(ADMIN)
    assertHello(t, await hello(app, bearer(token)), 'alice@example.com', 'Admin')
    idp.setDown(true)
    await eventually('refused after the outage outlasts the cached set', async () => await status(token) === 401)
    assertUnauthorized(t, await postMessage(app, bearer(token)), true)
    idp.setDown(false)
    await eventually('accepted again', async () => await status(token) === 200)
    assertCreated(t, await postMessage(app, bearer(token), 'after the outage'), 'after the outage', 'Alice')
  })
})
