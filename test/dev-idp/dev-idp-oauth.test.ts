import { createHash, randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import Fastify, { type FastifyInstance } from 'fastify'
import { createLocalJWKSet, jwtVerify } from 'jose'
import t, { type Test } from 'tap'
import { freePort } from '../../scripts/free-port.js'
import { escapeHtml } from '../../src/dev-idp/authorize-page.js'
import { bodyTypeConstraint } from '../../src/dev-idp/oauth-routes.js'
import { buildDevIdp, loadOrCreateKeys, verifyOwnToken, type DevIdpOptions } from '../../src/dev-idp/app.js'
import { createCodeStore, createOriginPolicy, verifierMatches, type Grant } from '../../src/dev-idp/oauth.js'
import { chooseBrowser, launchBrowser, startPageOrigin } from '../helpers/browser.js'

// The OAuth 2.0 authorization-code grant with PKCE (RFC 6749 4.1, RFC 7636) of the development
// identity provider, driven the way Swagger UI drives it.

const ISSUER = 'http://localhost:3002'
const AUDIENCE = 'backend-3-messages'
const API = 'http://localhost:3001'
const REDIRECT = `${API}/api-docs/static/oauth2-redirect.html`
const CLIENT = 'swagger-ui'
const FORM = { 'content-type': 'application/x-www-form-urlencoded' }
const ROLE_LIST = 'User, Moderator, Admin, SuperAdmin, Owner'

interface Pkce { verifier: string, challenge: string }

function pkce (): Pkce {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') }
}

async function devIdp (t: Test, over: Partial<DevIdpOptions> = {}): Promise<{ idp: FastifyInstance, dataDir: string }> {
  const dataDir = t.testdir()
  const idp = await buildDevIdp({ issuer: ISSUER, audience: AUDIENCE, dataDir, ...over })
  t.teardown(() => idp.close())
  return { idp, dataDir }
}

type Fields = Record<string, string | string[] | undefined>

/** A form or query string; undefined leaves a parameter out, an array repeats it. */
function encode (fields: Fields): string {
  const pairs = new URLSearchParams()
  for (const [name, value] of Object.entries(fields)) {
    for (const one of value === undefined ? [] : [value].flat()) pairs.append(name, one)
  }
  return pairs.toString()
}

/** The parameters Swagger UI sends to the authorization endpoint. */
function authorization (challenge: string, over: Fields = {}): Fields {
  return { response_type: 'code', client_id: CLIENT, redirect_uri: REDIRECT, state: 'xyz', code_challenge: challenge, code_challenge_method: 'S256', scope: '', ...over }
}

async function getAuthorize (idp: FastifyInstance, fields: Fields): Promise<{ status: number, headers: Record<string, unknown>, body: string }> {
  const response = await idp.inject({ url: `/authorize?${encode(fields)}` })
  return { status: response.statusCode, headers: response.headers, body: response.body }
}

async function postAuthorize (idp: FastifyInstance, fields: Fields): Promise<{ status: number, headers: Record<string, unknown>, body: string }> {
  const response = await idp.inject({ method: 'POST', url: '/authorize', headers: FORM, payload: encode(fields) })
  return { status: response.statusCode, headers: response.headers, body: response.body }
}

/** The developer submits the page's form for this subject and role. */
async function signIn (idp: FastifyInstance, challenge: string, chosen: Fields = { sub: 'alice', role: 'Admin' }, over: Fields = {}): Promise<string> {
  const { status, headers } = await postAuthorize(idp, { ...authorization(challenge, over), ...chosen, decision: 'allow' })
  if (status !== 303) throw new Error(`sign-in answered ${status}`)
  return new URL(String(headers.location)).searchParams.get('code') ?? ''
}

async function token (idp: FastifyInstance, fields: Fields, headers: Record<string, string> = {}): Promise<{ status: number, body: Record<string, unknown> }> {
  const response = await idp.inject({ method: 'POST', url: '/token', headers: { ...FORM, ...headers }, payload: encode(fields) })
  return { status: response.statusCode, body: response.json() }
}

/** What Swagger UI posts to the token endpoint. */
function exchange (code: string, verifier: string, over: Fields = {}): Fields {
  return { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: CLIENT, code_verifier: verifier, ...over }
}

/** The query of a redirect to REDIRECT, as an object; fails for a redirect elsewhere. */
function redirectQuery (location: unknown): Record<string, string> {
  const url = new URL(String(location))
  if (`${url.origin}${url.pathname}` !== REDIRECT) throw new Error(`redirected to ${String(location)}`)
  return Object.fromEntries(url.searchParams)
}

const invalidGrant = (description: string): { status: number, body: Record<string, unknown> } =>
  ({ status: 400, body: { error: 'invalid_grant', error_description: description } })
const invalidRequest = (description: string): { status: number, body: Record<string, unknown> } =>
  ({ status: 400, body: { error: 'invalid_request', error_description: description } })

t.test('the authorization-code flow with PKCE gives a token for the subject and role chosen on the page', async (t) => {
  const { idp, dataDir } = await devIdp(t)
  const { verifier, challenge } = pkce()

  const page = await getAuthorize(idp, authorization(challenge))
  t.equal(page.status, 200)
  t.equal(page.headers['content-type'], 'text/html; charset=utf-8')
  t.equal(page.headers['cache-control'], 'no-store')
  t.equal(page.headers['content-security-policy'], `default-src 'none'; form-action 'self' ${API}; frame-ancestors 'none'; base-uri 'none'`)
  for (const hidden of [
    '<input type="hidden" name="response_type" value="code">',
    `<input type="hidden" name="client_id" value="${CLIENT}">`,
    `<input type="hidden" name="redirect_uri" value="${REDIRECT}">`,
    '<input type="hidden" name="state" value="xyz">',
    `<input type="hidden" name="code_challenge" value="${challenge}">`,
    '<input type="hidden" name="code_challenge_method" value="S256">',
    '<form method="post" action="/authorize">',
    '<input id="sub" name="sub" value="dev-user" required maxlength="200">',
    '<select id="role" name="role"><option selected>User</option><option>Moderator</option><option>Admin</option><option>SuperAdmin</option><option>Owner</option></select>',
    '<input id="name" name="name" value="" maxlength="200">',
    '<input id="email" name="email" value="" type="email" maxlength="254">'
  ]) t.ok(page.body.includes(hidden), hidden)
  t.notOk(page.body.includes('name="scope"'), 'an empty scope is as good as none (RFC 6749 3.1)')
  t.notOk(/<script|<style|\sstyle=/i.test(page.body), 'no script, no style')

  const signedIn = await postAuthorize(idp, { ...authorization(challenge), sub: 'alice', role: 'Admin', name: 'Alice A', email: 'alice@x.io', decision: 'allow' })
  t.equal(signedIn.status, 303)
  t.equal(signedIn.headers['cache-control'], 'no-store')
  t.match(signedIn.headers.location, new RegExp(`^${REDIRECT}\\?code=[A-Za-z0-9_-]{43}&state=xyz$`))
  const { code } = redirectQuery(signedIn.headers.location)

  const response = await idp.inject({ method: 'POST', url: '/token', headers: FORM, payload: encode(exchange(code ?? '', verifier)) })
  t.equal(response.statusCode, 200)
  t.equal(response.headers['cache-control'], 'no-store')
  t.equal(response.headers.pragma, 'no-cache')
  const body = response.json()
  t.same(Object.keys(body).sort(), ['access_token', 'expires_in', 'token_type'])
  t.match(body, { access_token: /^[\w-]+\.[\w-]+\.[\w-]+$/, token_type: 'Bearer', expires_in: 3600 })

  const keys = await loadOrCreateKeys(dataDir)
  t.same(await verifyOwnToken(keys, ISSUER, body.access_token), { sub: 'alice', email: 'alice@x.io', name: 'Alice A', role: 'Admin' })
  const jwks = createLocalJWKSet((await idp.inject('/.well-known/jwks.json')).json())
  const { payload } = await jwtVerify(body.access_token, jwks, { issuer: ISSUER, audience: AUDIENCE, algorithms: ['RS256'] })
  t.equal((payload.exp ?? 0) - (payload.iat ?? 0), 3600, 'the API audience, an hour, as on the JSON route')

  t.same(await token(idp, exchange(code ?? '', verifier)), invalidGrant('The code is unknown, expired or already used'), 'a code is used once')
})

t.test('the page\'s defaults give dev-user as User; without a state none comes back', async (t) => {
  const { idp, dataDir } = await devIdp(t)
  const { verifier, challenge } = pkce()
  const signedIn = await postAuthorize(idp, { ...authorization(challenge, { state: undefined, scope: 'openid profile' }), sub: 'dev-user', role: 'User', name: '', email: '', decision: 'allow' })
  t.equal(signedIn.status, 303)
  t.match(signedIn.headers.location, new RegExp(`^${REDIRECT}\\?code=[A-Za-z0-9_-]{43}$`))
  const answer = await token(idp, exchange(redirectQuery(signedIn.headers.location).code ?? '', verifier))
  t.equal(answer.status, 200)
  t.same(await verifyOwnToken(await loadOrCreateKeys(dataDir), ISSUER, String(answer.body.access_token)),
    { sub: 'dev-user', email: 'dev-user@example.com', name: 'dev-user', role: 'User' })
})

t.test('a redirect_uri keeps its own query; the answer is appended to it', async (t) => {
  const { idp } = await devIdp(t)
  const { verifier, challenge } = pkce()
  const redirect = 'http://127.0.0.1:8080/callback?tab=auth'
  const signedIn = await postAuthorize(idp, { ...authorization(challenge, { redirect_uri: redirect, state: 'a b+c=' }), sub: 'bob', role: 'User' })
  t.equal(signedIn.status, 303)
  t.match(signedIn.headers.location, /^http:\/\/127\.0\.0\.1:8080\/callback\?tab=auth&code=[A-Za-z0-9_-]{43}&state=a%20b%2Bc%3D$/,
    'percent-encoded, a space as %20: Swagger UI decodes with decodeURIComponent')
  const code = new URL(String(signedIn.headers.location)).searchParams.get('code') ?? ''
  t.equal((await token(idp, exchange(code, verifier, { redirect_uri: redirect }))).status, 200)
})

t.test('a wrong code_verifier is invalid_grant, and the code is used up', async (t) => {
  const { idp } = await devIdp(t)
  const { verifier, challenge } = pkce()
  const code = await signIn(idp, challenge)
  t.same(await token(idp, exchange(code, pkce().verifier)), invalidGrant('code_verifier does not match the code_challenge'))
  t.same(await token(idp, exchange(code, verifier)), invalidGrant('The code is unknown, expired or already used'))
  // The challenge itself is not a verifier (S256, not plain).
  const other = pkce()
  t.same(await token(idp, exchange(await signIn(idp, other.challenge), other.challenge)), invalidGrant('code_verifier does not match the code_challenge'))
})

t.test('an expired code is invalid_grant', async (t) => {
  const { idp } = await devIdp(t, { authorizationCodeTtlMs: 1 })
  const { verifier, challenge } = pkce()
  const code = await signIn(idp, challenge)
  await sleep(10)
  t.same(await token(idp, exchange(code, verifier)), invalidGrant('The code is unknown, expired or already used'))
})

t.test('a code presented by another client or with another redirect_uri is invalid_grant', async (t) => {
  const { idp } = await devIdp(t)
  const cases: Array<[string, Fields, string]> = [
    ['another client', { client_id: 'other-client' }, 'The code was issued to another client'],
    ['another redirect_uri', { redirect_uri: `${API}/elsewhere.html` }, 'redirect_uri differs from the one of the authorization request'],
    ['a redirect_uri that only differs by a slash', { redirect_uri: `${REDIRECT}/` }, 'redirect_uri differs from the one of the authorization request']
  ]
  for (const [name, over, description] of cases) {
    const { verifier, challenge } = pkce()
    const code = await signIn(idp, challenge)
    t.same(await token(idp, exchange(code, verifier, over)), invalidGrant(description), name)
    t.same(await token(idp, exchange(code, verifier)), invalidGrant('The code is unknown, expired or already used'), `${name}: used up`)
  }
})

t.test('malformed token requests are invalid_request or unsupported_grant_type, and leave the code alone', async (t) => {
  const { idp } = await devIdp(t)
  const { verifier, challenge } = pkce()
  const code = await signIn(idp, challenge)
  const good = exchange(code, verifier)
  const cases: Array<[string, Fields, { status: number, body: Record<string, unknown> }]> = [
    ['no grant_type', { ...good, grant_type: undefined }, invalidRequest('grant_type is required, once')],
    ['an empty grant_type', { ...good, grant_type: '' }, invalidRequest('grant_type is required, once')],
    ['grant_type twice', { ...good, grant_type: ['authorization_code', 'authorization_code'] }, invalidRequest('grant_type is required, once')],
    ['the password grant', { ...good, grant_type: 'password' }, { status: 400, body: { error: 'unsupported_grant_type', error_description: 'Only grant_type=authorization_code is supported' } }],
    ['the client credentials grant', { grant_type: 'client_credentials', client_id: CLIENT }, { status: 400, body: { error: 'unsupported_grant_type', error_description: 'Only grant_type=authorization_code is supported' } }],
    ['no code', { ...good, code: undefined }, invalidRequest('code is required')],
    ['code twice', { ...good, code: [code, code] }, invalidRequest('code must be given once')],
    ['no redirect_uri', { ...good, redirect_uri: undefined }, invalidRequest('redirect_uri is required')],
    ['no client_id', { ...good, client_id: undefined }, invalidRequest('client_id is required')],
    ['no code_verifier', { ...good, code_verifier: undefined }, invalidRequest('code_verifier is required')],
    ['a short code_verifier', { ...good, code_verifier: verifier.slice(0, 42) }, invalidRequest('code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~')],
    ['a code_verifier with other characters', { ...good, code_verifier: `${verifier.slice(0, 42)}+` }, invalidRequest('code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~')],
    ['a code_verifier over 128 characters', { ...good, code_verifier: 'a'.repeat(129) }, invalidRequest('code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~')],
    ['an empty body', {}, invalidRequest('grant_type is required, once')],
    ['the JSON fields in a form', { sub: 'mallory', role: 'Owner' }, invalidRequest('grant_type is required, once')],
    ['an unknown code', { ...good, code: 'not-a-code' }, invalidGrant('The code is unknown, expired or already used')]
  ]
  for (const [name, fields, expected] of cases) t.same(await token(idp, fields), expected, name)

  const response = await idp.inject({ method: 'POST', url: '/token', headers: { 'content-type': 'application/x-www-form-urlencoded; charset=UTF-8' }, payload: encode({ grant_type: 'password' }) })
  t.equal(response.statusCode, 400)
  t.equal(response.headers['cache-control'], 'no-store', 'errors are not cached either')
  t.equal((await token(idp, good)).status, 200, 'the code survived every malformed request')
})

t.test('JSON POST /token is unchanged beside the form-encoded one', async (t) => {
  const { idp, dataDir } = await devIdp(t)
  const json = await idp.inject({ method: 'POST', url: '/token', payload: { sub: 'carol', role: 'Moderator' } })
  t.equal(json.statusCode, 200)
  t.equal(json.headers['cache-control'], 'no-store')
  t.equal(json.headers.pragma, undefined)
  t.same(await verifyOwnToken(await loadOrCreateKeys(dataDir), ISSUER, json.json().access_token),
    { sub: 'carol', email: 'carol@example.com', name: 'carol', role: 'Moderator' })

  const { verifier, challenge } = pkce()
  const oauthAsJson = await idp.inject({ method: 'POST', url: '/token', payload: exchange(await signIn(idp, challenge), verifier) })
  t.same({ status: oauthAsJson.statusCode, body: oauthAsJson.json() }, {
    status: 400, body: { error: 'Validation failed', details: ['sub is required and must be a string', 'role is required and must be a string'] }
  }, 'a JSON body is the CONTRACT 3 request, whatever it holds')
  const text = await idp.inject({ method: 'POST', url: '/token', headers: { 'content-type': 'text/plain' }, payload: 'grant_type=authorization_code' })
  t.same({ status: text.statusCode, body: text.json() }, { status: 415, body: { error: 'Unsupported media type' } })
  const large = await idp.inject({ method: 'POST', url: '/token', headers: FORM, payload: `grant_type=${'a'.repeat(20_000)}` })
  t.same({ status: large.statusCode, body: large.json() }, { status: 413, body: { error: 'Request body too large' } })
})

t.test('GET /authorize answers 400 and never redirects when the client or its redirect_uri cannot be trusted', async (t) => {
  const { idp } = await devIdp(t)
  const { challenge } = pkce()
  const notHttp = 'redirect_uri must be an absolute http(s) URL without credentials or fragment'
  const cases: Array<[string, Fields, string]> = [
    ['no client_id', { client_id: undefined }, 'client_id is required: one value of at most 200 printable characters'],
    ['client_id twice', { client_id: [CLIENT, 'other'] }, 'client_id is required: one value of at most 200 printable characters'],
    ['a long client_id', { client_id: 'c'.repeat(201) }, 'client_id is required: one value of at most 200 printable characters'],
    ['a client_id with a line break', { client_id: 'a\nb' }, 'client_id is required: one value of at most 200 printable characters'],
    ['no redirect_uri', { redirect_uri: undefined }, 'redirect_uri is required'],
    ['redirect_uri twice', { redirect_uri: [REDIRECT, REDIRECT] }, 'redirect_uri must be given once'],
    ['a relative redirect_uri', { redirect_uri: '/api-docs/static/oauth2-redirect.html' }, notHttp],
    ['a javascript: URL', { redirect_uri: 'javascript:alert(1)' }, notHttp],
    ['an ftp URL', { redirect_uri: 'ftp://localhost/cb' }, notHttp],
    ['a fragment', { redirect_uri: `${REDIRECT}#top` }, notHttp],
    ['credentials', { redirect_uri: 'http://user:secret@localhost:3001/cb' }, notHttp],
    ['a line break the URL parser would drop', { redirect_uri: 'http://local\nhost:3001/cb' }, notHttp],
    ['a space', { redirect_uri: `${API}/a b` }, notHttp],
    ['a long redirect_uri', { redirect_uri: `${API}/${'a'.repeat(2000)}` }, 'redirect_uri must be at most 2000 characters'],
    ['another host', { redirect_uri: 'http://example.com/cb' }, 'redirect_uri is not allowed: the origin http://example.com is not one this provider trusts'],
    ['a host that only starts like localhost', { redirect_uri: 'http://localhost.example.com:3001/cb' }, 'redirect_uri is not allowed: the origin http://localhost.example.com:3001 is not one this provider trusts'],
    ['https on loopback (the default allows http)', { redirect_uri: 'https://localhost:3001/cb' }, 'redirect_uri is not allowed: the origin https://localhost:3001 is not one this provider trusts']
  ]
  for (const [name, over, description] of cases) {
    const answer = await getAuthorize(idp, authorization(challenge, over))
    t.same({ status: answer.status, body: JSON.parse(answer.body), location: answer.headers.location, cache: answer.headers['cache-control'] },
      { status: 400, body: { error: 'invalid_request', error_description: description }, location: undefined, cache: 'no-store' }, name)
  }
  // Broken at the same time as other parameters: still no redirect.
  const answer = await getAuthorize(idp, { redirect_uri: 'http://example.com/cb', client_id: CLIENT })
  t.equal(answer.status, 400)
  t.equal(answer.headers.location, undefined)

  for (const redirect of ['http://127.0.0.1:8080/cb', 'http://[::1]:3001/cb', 'http://localhost/cb', 'http://LOCALHOST:3001/cb']) {
    t.equal((await getAuthorize(idp, authorization(challenge, { redirect_uri: redirect }))).status, 200, `${redirect} is on loopback`)
  }
})

t.test('other invalid parameters go back to the redirect_uri with the error and the state', async (t) => {
  const { idp } = await devIdp(t)
  const { challenge } = pkce()
  const challengeRule = 'code_challenge is required: 43 to 128 characters of A-Z a-z 0-9 - . _ ~ (PKCE)'
  const cases: Array<[string, Fields, Record<string, string>]> = [
    ['no response_type', { response_type: undefined }, { error: 'invalid_request', error_description: 'response_type is required, once' }],
    ['response_type twice', { response_type: ['code', 'code'] }, { error: 'invalid_request', error_description: 'response_type is required, once' }],
    ['the implicit flow', { response_type: 'token' }, { error: 'unsupported_response_type', error_description: 'Only response_type=code is supported' }],
    ['no code_challenge', { code_challenge: undefined }, { error: 'invalid_request', error_description: challengeRule }],
    ['a short code_challenge', { code_challenge: challenge.slice(0, 42) }, { error: 'invalid_request', error_description: challengeRule }],
    ['a long code_challenge', { code_challenge: 'a'.repeat(129) }, { error: 'invalid_request', error_description: challengeRule }],
    ['base64 rather than base64url', { code_challenge: `${challenge.slice(0, 42)}/` }, { error: 'invalid_request', error_description: challengeRule }],
    ['no code_challenge_method', { code_challenge_method: undefined }, { error: 'invalid_request', error_description: 'code_challenge_method must be S256' }],
    ['the plain method', { code_challenge_method: 'plain' }, { error: 'invalid_request', error_description: 'code_challenge_method must be S256' }],
    ['scope twice', { scope: ['a', 'b'] }, { error: 'invalid_request', error_description: 'scope must be one value of at most 1000 characters' }]
  ]
  for (const [name, over, error] of cases) {
    const answer = await getAuthorize(idp, authorization(challenge, over))
    t.same({ status: answer.status, query: redirectQuery(answer.headers.location), cache: answer.headers['cache-control'] },
      { status: 303, query: { ...error, state: 'xyz' }, cache: 'no-store' }, name)
  }
  const noState = await getAuthorize(idp, authorization(challenge, { state: ['one', 'two'] }))
  t.same({ status: noState.status, location: noState.headers.location }, {
    status: 303, location: `${REDIRECT}?error=invalid_request&error_description=state%20must%20be%20one%20value%20of%20at%20most%201000%20printable%20characters`
  }, 'a state that cannot be echoed is left out')
})

t.test('POST /authorize checks everything again, and the page can cancel', async (t) => {
  const { idp } = await devIdp(t)
  const { challenge } = pkce()
  const chosen = { sub: 'alice', role: 'Admin' }

  const tampered = await postAuthorize(idp, { ...authorization(challenge, { redirect_uri: 'http://example.com/steal' }), ...chosen })
  t.same({ status: tampered.status, body: JSON.parse(tampered.body), location: tampered.headers.location }, {
    status: 400,
    body: { error: 'invalid_request', error_description: 'redirect_uri is not allowed: the origin http://example.com is not one this provider trusts' },
    location: undefined
  })
  const noChallenge = await postAuthorize(idp, { ...authorization(challenge, { code_challenge: undefined }), ...chosen })
  t.same({ status: noChallenge.status, query: redirectQuery(noChallenge.headers.location) }, {
    status: 303,
    query: { error: 'invalid_request', error_description: 'code_challenge is required: 43 to 128 characters of A-Z a-z 0-9 - . _ ~ (PKCE)', state: 'xyz' }
  })
  const array = await idp.inject({ method: 'POST', url: '/authorize', payload: [authorization(challenge)] })
  t.same({ status: array.statusCode, body: array.json() }, {
    status: 400, body: { error: 'invalid_request', error_description: 'client_id is required: one value of at most 200 printable characters' }
  }, 'a body that is not a set of fields carries no parameter')
  const cancelled = await postAuthorize(idp, { ...authorization(challenge), sub: '', role: '', decision: 'deny' })
  t.same({ status: cancelled.status, query: redirectQuery(cancelled.headers.location), cache: cancelled.headers['cache-control'] }, {
    status: 303, query: { error: 'access_denied', error_description: 'The sign-in was cancelled', state: 'xyz' }, cache: 'no-store'
  })

  const refusals: Array<[string, Fields, string[]]> = [
    ['no subject', { sub: '', role: 'User' }, ['Subject is required: at most 200 characters, not only spaces']],
    ['a blank subject', { sub: '   ', role: 'User' }, ['Subject is required: at most 200 characters, not only spaces']],
    ['a long subject', { sub: 's'.repeat(201), role: 'User' }, ['Subject is required: at most 200 characters, not only spaces']],
    ['an unknown role', { sub: 'alice', role: 'Janitor' }, [`Role must be one of ${ROLE_LIST}`]],
    ['two roles', { sub: 'alice', role: ['User', 'Owner'] }, [`Role must be one of ${ROLE_LIST}`]],
    ['long name and email', { sub: 'alice', role: 'User', name: 'n'.repeat(201), email: `${'e'.repeat(250)}@x.io` }, ['Name must be at most 200 characters', 'Email must be at most 254 characters']],
    ['nothing chosen', {}, ['Subject is required: at most 200 characters, not only spaces', `Role must be one of ${ROLE_LIST}`]],
    ['a NUL in the subject or the name', { sub: 'a\u0000b', role: 'User', name: '\u0000' }, ['Subject, name and email must be valid Unicode text without NUL characters']]
  ]
  for (const [name, fields, problems] of refusals) {
    const answer = await postAuthorize(idp, { ...authorization(challenge), ...fields })
    t.equal(answer.status, 400, name)
    t.equal(answer.headers['content-type'], 'text/html; charset=utf-8', name)
    t.equal(answer.headers.location, undefined, name)
    t.ok(answer.body.includes(`<ul role="alert">${problems.map((problem) => `<li>${problem}</li>`).join('')}</ul>`), `${name}: ${problems.join('; ')}`)
    t.ok(answer.body.includes(`<input type="hidden" name="code_challenge" value="${challenge}">`), `${name}: the form is offered again`)
  }
})

t.test('every value printed into the page is escaped', async (t) => {
  const { idp } = await devIdp(t)
  const { challenge } = pkce()
  const state = '"><script>alert(1)</script>&\''
  const page = await getAuthorize(idp, authorization(challenge, { state, client_id: '<b>evil</b>', redirect_uri: `${API}/cb?a=1&b="2"` }))
  t.equal(page.status, 200)
  t.ok(page.body.includes('<input type="hidden" name="state" value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;&#39;">'))
  t.ok(page.body.includes('<strong>&lt;b&gt;evil&lt;/b&gt;</strong>'))
  t.ok(page.body.includes(`<input type="hidden" name="redirect_uri" value="${API}/cb?a=1&amp;b=&quot;2&quot;">`))
  t.notOk(/<script|<b>/.test(page.body), 'nothing injected')

  const refused = await postAuthorize(idp, { ...authorization(challenge, { state }), sub: '<img src=x onerror=alert(1)>', role: '"><i>', name: '</p><p>', email: '\'onfocus=\'x' })
  t.equal(refused.status, 400)
  for (const escaped of [
    '<input id="sub" name="sub" value="&lt;img src=x onerror=alert(1)&gt;" required maxlength="200">',
    '<input id="name" name="name" value="&lt;/p&gt;&lt;p&gt;" maxlength="200">',
    '<input id="email" name="email" value="&#39;onfocus=&#39;x" type="email" maxlength="254">',
    '<select id="role" name="role"><option>User</option><option>Moderator</option><option>Admin</option><option>SuperAdmin</option><option>Owner</option></select>'
  ]) t.ok(refused.body.includes(escaped), escaped)
  t.notOk(/<img|<i>|<script|selected/.test(refused.body), 'nothing injected, no unknown role selected')

  t.equal(escapeHtml('&<>"\''), '&amp;&lt;&gt;&quot;&#39;')
})

t.test('CORS: the allowed origins may call /token, the key set and userinfo, preflight included', async (t) => {
  const { idp } = await devIdp(t)
  const preflight = async (origin: string, url = '/token', headers = 'content-type,x-requested-with'): Promise<{ status: number, headers: Record<string, unknown>, body: string }> => {
    const response = await idp.inject({
      method: 'OPTIONS', url, headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': headers }
    })
    return { status: response.statusCode, headers: response.headers, body: response.body }
  }
  const cors = (headers: Record<string, unknown>): Record<string, unknown> =>
    Object.fromEntries(Object.entries(headers).filter(([name]) => name.startsWith('access-control-') || name === 'vary'))

  const allowed = await preflight(API)
  t.equal(allowed.status, 204)
  t.same(cors(allowed.headers), {
    'access-control-allow-origin': API,
    'access-control-allow-methods': 'GET, POST',
    'access-control-allow-headers': 'Authorization, Content-Type, X-Requested-With',
    'access-control-max-age': '600',
    vary: 'Origin'
  })
  t.equal((await preflight('http://127.0.0.1:5173', '/v2/oauth/userinfo', 'authorization')).status, 204)

  const refusals: Array<[string, string]> = [['http://evil.example', '/token'], ['https://localhost:3001', '/token'], ['null', '/token'],
    ['http://localhost.evil.example', '/token'], [API, '/authorize'], [API, '/nowhere']]
  for (const [origin, url] of refusals) {
    const refused = await preflight(origin, url)
    t.same({ status: refused.status, body: JSON.parse(refused.body), cors: cors(refused.headers) },
      { status: 404, body: { error: 'Not found' }, cors: { vary: 'Origin' } }, `${origin} ${url}`)
  }

  const { verifier, challenge } = pkce()
  const code = await signIn(idp, challenge)
  const fromAllowed = await idp.inject({ method: 'POST', url: '/token', headers: { ...FORM, origin: API, 'x-requested-with': 'XMLHttpRequest' }, payload: encode(exchange(code, verifier)) })
  t.equal(fromAllowed.statusCode, 200)
  t.equal(fromAllowed.headers['access-control-allow-origin'], API)
  const failed = await idp.inject({ method: 'POST', url: '/token', headers: { ...FORM, origin: API }, payload: encode(exchange(code, verifier)) })
  t.equal(failed.statusCode, 400)
  t.equal(failed.headers['access-control-allow-origin'], API, 'the browser may read an error too')
  const fromElsewhere = await idp.inject({ method: 'POST', url: '/token', headers: { origin: 'http://evil.example' }, payload: { sub: 'a', role: 'User' } })
  t.equal(fromElsewhere.headers['access-control-allow-origin'], undefined)
  t.equal((await idp.inject({ url: '/.well-known/jwks.json', headers: { origin: API } })).headers['access-control-allow-origin'], API)
  t.equal((await getAuthorize(idp, { ...authorization(challenge) })).headers['access-control-allow-origin'], undefined)
})

t.test('allowedOrigins replaces the loopback default for CORS and redirect_uri', async (t) => {
  const docs = 'https://docs.example.com'
  const { idp } = await devIdp(t, { allowedOrigins: [`${docs}/`, 'http://localhost:80'] })
  const { verifier, challenge } = pkce()
  const redirect = `${docs}/api-docs/static/oauth2-redirect.html`
  t.equal((await getAuthorize(idp, authorization(challenge, { redirect_uri: redirect }))).status, 200)
  t.equal((await getAuthorize(idp, authorization(challenge, { redirect_uri: 'http://localhost/cb' }))).status, 200, 'the default port is the same origin')
  t.same(JSON.parse((await getAuthorize(idp, authorization(challenge))).body), {
    error: 'invalid_request', error_description: `redirect_uri is not allowed: the origin ${API} is not one this provider trusts`
  })
  const code = await signIn(idp, challenge, { sub: 'erin', role: 'Owner' }, { redirect_uri: redirect })
  t.equal((await token(idp, exchange(code, verifier, { redirect_uri: redirect }), { origin: docs })).status, 200)

  const preflight = async (origin: string): Promise<number> =>
    (await idp.inject({ method: 'OPTIONS', url: '/token', headers: { origin, 'access-control-request-method': 'POST' } })).statusCode
  t.equal(await preflight(docs), 204)
  t.equal(await preflight('http://localhost'), 204)
  t.equal(await preflight(API), 404)

  for (const entry of ['docs.example.com', `${docs}/path`, 'ftp://docs.example.com', `${docs}?q=1`, 'http://user@localhost']) {
    await t.rejects(buildDevIdp({ issuer: ISSUER, audience: AUDIENCE, dataDir: t.testdir(), allowedOrigins: [entry] }), {
      message: `allowedOrigins: ${JSON.stringify(entry)} is not an http(s) origin such as http://localhost:3001`
    }, entry)
  }
})

t.test('outstanding codes are bounded: past the limit the oldest is dropped', async (t) => {
  const { idp } = await devIdp(t, { maxAuthorizationCodes: 2 })
  const pairs = [pkce(), pkce(), pkce()]
  const codes: string[] = []
  for (const { challenge } of pairs) codes.push(await signIn(idp, challenge))
  const answers: number[] = []
  for (const [i, { verifier }] of pairs.entries()) answers.push((await token(idp, exchange(codes[i] ?? '', verifier))).status)
  t.same(answers, [400, 200, 200])
})

t.test('the code store: single use, exact expiry, a bound, checked options', async (t) => {
  let now = 1_000
  const store = createCodeStore({ ttlMs: 60_000, maxCodes: 3, now: () => now })
  const grant: Grant = { clientId: CLIENT, redirectUri: REDIRECT, codeChallenge: pkce().challenge, claims: { sub: 'alice', role: 'Admin' } }
  const first = store.issue(grant)
  t.match(first, /^[A-Za-z0-9_-]{43}$/, '256 random bits, base64url')
  t.not(store.issue(grant), first)
  t.equal(store.size, 2)
  now += 59_999
  t.same(store.take(first), grant, 'good until the last millisecond')
  t.equal(store.take(first), undefined, 'once')
  const late = store.issue(grant)
  now += 60_000
  t.equal(store.take(late), undefined, 'gone at 60 s')
  store.issue(grant)
  t.equal(store.size, 1, 'expired codes are swept when a new one is issued')
  for (let i = 0; i < 5; i++) store.issue(grant)
  t.equal(store.size, 3)

  t.throws(() => createCodeStore({ ttlMs: 0 }), { message: 'the authorization code lifetime must be a positive number of milliseconds' })
  t.throws(() => createCodeStore({ maxCodes: 1.5 }), { message: 'the number of outstanding authorization codes must be a positive integer' })
  await t.rejects(buildDevIdp({ issuer: ISSUER, audience: AUDIENCE, dataDir: t.testdir(), authorizationCodeTtlMs: -1 }))
})

t.test('PKCE S256 and the default origins', async (t) => {
  // RFC 7636 appendix B.
  t.equal(verifierMatches('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk', 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'), true)
  t.equal(verifierMatches('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXj', 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'), false)
  t.equal(verifierMatches('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk', 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM='), false)

  const loopback = createOriginPolicy()
  const admitted = ['http://localhost:3001', 'http://localhost', 'http://127.0.0.1:65535', 'http://[::1]:8080']
  const refused = ['https://localhost:3001', 'http://127.0.0.2:3001', 'http://localhost:3001/', 'http://example.com', 'null', '', 'http://0.0.0.0:3001']
  t.same(admitted.map(loopback), admitted.map(() => true))
  t.same(refused.map(loopback), refused.map(() => false))
  t.throws(() => bodyTypeConstraint.validate?.(42), { message: 'the bodyType constraint is a media type such as application/json' })
})

t.test('in Chromium: the page signs in, the redirect brings the code, fetch exchanges it as Swagger UI does', async (t) => {
  const issuer = `http://127.0.0.1:${await freePort()}`
  const dataDir = t.testdir()
  const idp = await buildDevIdp({ issuer, audience: AUDIENCE, dataDir })
  t.teardown(() => idp.close())
  await idp.listen({ host: '127.0.0.1', port: Number(new URL(issuer).port) })
  const client = await startPageOrigin(t)
  const redirect = `${client}/cb`
  const { verifier, challenge } = pkce()

  const browser = await launchBrowser(await chooseBrowser())
  t.teardown(() => browser.close())
  const page = await (await browser.newContext()).newPage()
  page.setDefaultTimeout(15_000)
  await page.goto(`${issuer}/authorize?${encode(authorization(challenge, { redirect_uri: redirect, state: 'c3RhdGU=' }))}`)
  await page.fill('#sub', 'grace')
  await page.selectOption('#role', 'SuperAdmin')
  await page.fill('#email', 'grace@example.org')
  await Promise.all([page.waitForURL((url) => url.href.startsWith(`${redirect}?`)), page.click('button[value=allow]')])
  const query = Object.fromEntries(new URL(page.url()).searchParams)
  t.match(query, { code: /^[A-Za-z0-9_-]{43}$/, state: 'c3RhdGU=' })

  const body = encode(exchange(query.code ?? '', verifier, { redirect_uri: redirect }))
  const answer = await page.evaluate(async ({ url, body }) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { Accept: 'application/json, text/plain, */*', 'Content-Type': 'application/x-www-form-urlencoded', 'X-Requested-With': 'XMLHttpRequest' },
      body
    })
    return { status: response.status, body: await response.json() as Record<string, unknown> }
  }, { url: `${issuer}/token`, body })
  t.match(answer, { status: 200, body: { token_type: 'Bearer', expires_in: 3600 } })
  t.same(await verifyOwnToken(await loadOrCreateKeys(dataDir), issuer, String(answer.body.access_token)),
    { sub: 'grace', email: 'grace@example.org', name: 'grace', role: 'SuperAdmin' })
})

t.test('in Chromium: Swagger UI signs in by itself and sends the token with "Try it out"', async (t) => {
  const issuer = `http://localhost:${await freePort()}`
  const dataDir = t.testdir()
  const idp = await buildDevIdp({ issuer, audience: AUDIENCE, dataDir })
  t.teardown(() => idp.close())
  await idp.listen({ host: '127.0.0.1', port: Number(new URL(issuer).port) })

  // A bare API with the security scheme and Swagger UI options the service uses for this provider.
  const api = Fastify()
  t.teardown(() => api.close())
  await api.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'sign-in', version: '1' },
      components: {
        securitySchemes: {
          devSignIn: { type: 'oauth2', flows: { authorizationCode: { authorizationUrl: `${issuer}/authorize`, tokenUrl: `${issuer}/token`, scopes: {} } } }
        }
      }
    }
  })
  await api.register(swaggerUi, { routePrefix: '/api-docs', initOAuth: { clientId: CLIENT, usePkceWithAuthorizationCodeGrant: true } })
  api.get('/whoami', { schema: { security: [{ devSignIn: [] }] } }, async (request) => ({ authorization: request.headers.authorization ?? null }))
  const apiPort = await freePort()
  await api.listen({ host: '127.0.0.1', port: apiPort })

  const browser = await launchBrowser(await chooseBrowser())
  t.teardown(() => browser.close())
  const context = await browser.newContext()
  const page = await context.newPage()
  page.setDefaultTimeout(15_000)
  await page.goto(`http://localhost:${apiPort}/api-docs`)
  await page.click('button.authorize')
  const [popup] = await Promise.all([context.waitForEvent('page'), page.click('.auth-container button.authorize')])
  await popup.waitForLoadState()
  t.match(popup.url(), new RegExp(`^${issuer}/authorize\\?response_type=code&client_id=swagger-ui&redirect_uri=[^&]+&state=[^&]+&code_challenge=[\\w-]{43}&code_challenge_method=S256$`))
  await popup.fill('#sub', 'swagger-sam')
  await popup.selectOption('#role', 'Moderator')
  await Promise.all([popup.waitForEvent('close'), popup.click('button[value=allow]')])
  await page.waitForSelector('.auth-container button:has-text("Logout")')
  await page.click('.modal-ux button.close-modal')

  await page.click('#operations-default-get_whoami button.opblock-summary-control')
  await page.click('button.try-out__btn')
  const [answer] = await Promise.all([page.waitForResponse((response) => response.url().endsWith('/whoami')), page.click('button.execute')])
  const { authorization: sent } = await answer.json() as { authorization: string }
  t.match(sent, /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/)
  t.same(await verifyOwnToken(await loadOrCreateKeys(dataDir), issuer, sent.slice('Bearer '.length)),
    { sub: 'swagger-sam', email: 'swagger-sam@example.com', name: 'swagger-sam', role: 'Moderator' })
})
