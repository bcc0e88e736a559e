import { readFile, stat, writeFile } from 'node:fs/promises'
import { connect, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { calculateJwkThumbprint, createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JWTPayload } from 'jose'
import t, { type Test } from 'tap'
import { buildDevIdp, createTokenSigner, loadOrCreateKeys, mintToken } from '../../src/dev-idp/app.js'

const ISSUER = 'http://localhost:3002'
const AUDIENCE = 'backend-3-messages'

async function devIdp (t: Test, dataDir: string = t.testdir(), issuer: string = ISSUER): Promise<FastifyInstance> {
  const idp = await buildDevIdp({ issuer, audience: AUDIENCE, dataDir })
  t.teardown(() => idp.close())
  return idp
}

async function postToken (idp: FastifyInstance, payload: unknown): Promise<{ status: number, body: Record<string, unknown> }> {
  const response = await idp.inject({ method: 'POST', url: '/token', payload: payload as Record<string, unknown> })
  return { status: response.statusCode, body: response.json() }
}

async function accessToken (idp: FastifyInstance, payload: Record<string, unknown>): Promise<string> {
  const { body } = await postToken(idp, payload)
  return body.access_token as string
}

async function verifyWithJwks (idp: FastifyInstance, token: string, audience: string = AUDIENCE): Promise<JWTPayload> {
  const jwks = createLocalJWKSet((await idp.inject('/.well-known/jwks.json')).json())
  const { payload } = await jwtVerify(token, jwks, { issuer: ISSUER, audience, algorithms: ['RS256'] })
  return payload
}

async function userinfo (idp: FastifyInstance, authorization?: string): Promise<{ status: number, body: unknown, challenge: unknown }> {
  const response = await idp.inject({ url: '/v2/oauth/userinfo', headers: authorization === undefined ? {} : { authorization } })
  return { status: response.statusCode, body: response.json(), challenge: response.headers['www-authenticate'] }
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000)

t.test('GET /.well-known/jwks.json serves the one RS256 signing key with its thumbprint as kid', async (t) => {
  const idp = await devIdp(t)
  const response = await idp.inject('/.well-known/jwks.json')
  t.equal(response.statusCode, 200)
  const body = response.json()
  t.match(body, { keys: [{ kty: 'RSA', n: /^[\w-]{340,}$/, e: 'AQAB', kid: /^[\w-]{43}$/, alg: 'RS256', use: 'sig' }] })
  t.equal(body.keys.length, 1)
  t.same(Object.keys(body.keys[0]).sort(), ['alg', 'e', 'kid', 'kty', 'n', 'use'])
  t.equal(body.keys[0].kid, await calculateJwkThumbprint(body.keys[0]))
})

t.test('POST /token mints an RS256 token with the contract defaults', async (t) => {
  const idp = await devIdp(t)
  const before = nowSeconds()
  const response = await idp.inject({ method: 'POST', url: '/token', payload: { sub: 'alice', role: 'Admin' } })
  t.equal(response.statusCode, 200)
  t.equal(response.headers['cache-control'], 'no-store')
  const body = response.json()
  t.match(body, { access_token: /^[\w-]+\.[\w-]+\.[\w-]+$/, token_type: 'Bearer', expires_in: 3600 })
  t.same(Object.keys(body).sort(), ['access_token', 'expires_in', 'token_type'])

  const kid = (await idp.inject('/.well-known/jwks.json')).json().keys[0].kid
  t.same(decodeProtectedHeader(body.access_token), { alg: 'RS256', kid, typ: 'JWT' })
  const claims = await verifyWithJwks(idp, body.access_token)
  const iat = claims.iat as number
  t.ok(iat >= before && iat <= nowSeconds(), 'iat is now')
  t.same(claims, { iss: ISSUER, aud: AUDIENCE, sub: 'alice', role: 'Admin', email: 'alice@example.com', name: 'alice', iat, exp: iat + 3600 })
})

t.test('POST /token uses the given email, name, audience and lifetime', async (t) => {
  const idp = await devIdp(t)
  const { status, body } = await postToken(idp, { sub: 'bob', role: 'User', email: 'bob@x.io', name: 'Bob B', aud: 'other-api', expiresIn: 60 })
  t.equal(status, 200)
  t.match(body, { token_type: 'Bearer', expires_in: 60 })
  const claims = await verifyWithJwks(idp, body.access_token as string, 'other-api')
  const iat = claims.iat as number
  t.same(claims, { iss: ISSUER, aud: 'other-api', sub: 'bob', role: 'User', email: 'bob@x.io', name: 'Bob B', iat, exp: iat + 60 })
})

t.test('POST /token accepts a role outside the hierarchy, so tests can mint one', async (t) => {
  const idp = await devIdp(t)
  const claims = await verifyWithJwks(idp, await accessToken(idp, { sub: 'carol', role: 'Janitor' }))
  t.equal(claims.role, 'Janitor')
})

t.test('POST /token rejects invalid bodies with 400 and every failing field', async (t) => {
  const idp = await devIdp(t)
  const cases: Array<[string, unknown, string[]]> = [
    ['empty object', {}, ['sub is required and must be a string', 'role is required and must be a string']],
    ['only sub', { sub: 'alice' }, ['role is required and must be a string']],
    ['empty strings', { sub: '', role: ' ' }, ['sub is required and must be a string', 'role is required and must be a string']],
    ['number as sub', { sub: 42, role: 'Admin' }, ['sub is required and must be a string']],
    ['long sub', { sub: 'a'.repeat(201), role: 'Admin' }, ['sub must be at most 200 characters']],
    ['long role', { sub: 'a', role: 'r'.repeat(51) }, ['role must be at most 50 characters']],
    ['zero lifetime', { sub: 'a', role: 'Admin', expiresIn: 0 }, ['expiresIn must be at least 1']],
    ['lifetime over a day', { sub: 'a', role: 'Admin', expiresIn: 86401 }, ['expiresIn must be at most 86400']],
    ['fractional lifetime', { sub: 'a', role: 'Admin', expiresIn: 1.5 }, ['expiresIn must be an integer']],
    ['lifetime as numeric text', { sub: 'a', role: 'Admin', expiresIn: '60' }, ['expiresIn must be an integer']],
    ['lifetime as text', { sub: 'a', role: 'Admin', expiresIn: 'soon' }, ['expiresIn must be a number']],
    // CONTRACT 16: the claims a local user is stored from are text PostgreSQL can hold.
    ['NUL in sub', { sub: 'a\u0000b', role: 'Admin' }, ['sub must not contain the NUL character']],
    ['lone surrogates in sub, email and name', { sub: 'a\ud800', role: 'Admin', email: '\udfff@x.io', name: 'N\ude00\ud83d' },
      ['sub must be valid Unicode text', 'email must be valid Unicode text', 'name must be valid Unicode text']]
  ]
  for (const [name, payload, details] of cases) {
    t.same(await postToken(idp, payload), { status: 400, body: { error: 'Validation failed', details } }, name)
  }

  const noBody = await idp.inject({ method: 'POST', url: '/token' })
  t.same({ status: noBody.statusCode, body: noBody.json() }, {
    status: 400,
    body: { error: 'Validation failed', details: ['sub is required and must be a string', 'role is required and must be a string'] }
  })
})

t.test('POST /token maps body and URL errors to the one error shape', async (t) => {
  const idp = await devIdp(t)
  const send = async (options: InjectOptions): Promise<{ status: number, body: unknown }> => {
    const response = await idp.inject(options)
    return { status: response.statusCode, body: response.json() }
  }
  t.same(await send({ method: 'POST', url: '/token', headers: { 'content-type': 'application/json' }, payload: '{"sub":' }),
    { status: 400, body: { error: 'Malformed JSON body' } })
  t.same(await send({ method: 'POST', url: '/token', headers: { 'content-type': 'text/plain' }, payload: 'sub=alice' }),
    { status: 415, body: { error: 'Unsupported media type' } })
  t.same(await send({ method: 'POST', url: '/token', payload: { sub: 'a'.repeat(20_000), role: 'Admin' } }),
    { status: 413, body: { error: 'Request body too large' } })
  t.same(await send({ method: 'POST', url: '/token', headers: { 'content-type': 'application/json', 'content-length': '5' }, payload: '{}' }),
    { status: 400, body: { error: 'Bad Request' } })
  t.same(await send({ url: '/%zz' }), { status: 400, body: { error: 'Bad Request' } })
})

t.test('only a loopback Host is answered: any other is 421 Misdirected request (CONTRACT 16, DNS rebinding)', async (t) => {
  const idp = await devIdp(t)
  const misdirected = { status: 421, body: { error: 'Misdirected request' } }
  const requests: InjectOptions[] = [
    { method: 'POST', url: '/token', payload: { sub: 'mallory', role: 'Owner' } },
    { url: '/.well-known/jwks.json' },
    { url: '/v2/oauth/userinfo', headers: { authorization: 'Bearer x' } },
    { url: '/authorize?client_id=swagger-ui' },
    { method: 'OPTIONS', url: '/token', headers: { origin: 'http://localhost:3001', 'access-control-request-method': 'POST' } },
    { url: '/nowhere' }
  ]
  for (const host of ['evil.example', 'evil.example:3002', 'localhost.evil.example:3002', '127.0.0.1.nip.io:3002', 'localhost:3002@evil.example', '127.0.0.2:3002', '[::2]:3002']) {
    for (const request of requests) {
      const response = await idp.inject({ ...request, headers: { ...request.headers, host } })
      t.same({ status: response.statusCode, body: response.json(), cors: response.headers['access-control-allow-origin'] }, { ...misdirected, cors: undefined },
        `Host ${JSON.stringify(host)}: ${request.method ?? 'GET'} ${request.url}`)
    }
  }
  for (const host of ['localhost', 'localhost:3002', 'LocalHost:3002', '127.0.0.1', '127.0.0.1:55123', '[::1]', '[::1]:3002']) {
    const response = await idp.inject({ method: 'POST', url: '/token', payload: { sub: 'alice', role: 'Admin' }, headers: { host } })
    t.equal(response.statusCode, 200, `Host ${host}: answered`)
  }
  t.equal((await idp.inject('/.well-known/jwks.json')).statusCode, 200, 'inject\'s own Host, localhost:80, is answered')

  // On a real listener, as a browser would arrive under a rebound name.
  await idp.listen({ host: '127.0.0.1', port: 0 })
  const { port } = idp.server.address() as AddressInfo
  const raw = async (head: string): Promise<string> => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()))
    socket.write(`${head}\r\nConnection: close\r\n\r\n`)
    await closed
    const text = Buffer.concat(chunks).toString()
    return `${text.split(' ', 2)[1]} ${text.slice(text.indexOf('\r\n\r\n') + 4)}`
  }
  t.equal(await raw(`GET /.well-known/jwks.json HTTP/1.1\r\nHost: rebound.example:${port}`), '421 {"error":"Misdirected request"}', 'another name: 421')
  t.equal(await raw('GET /.well-known/jwks.json HTTP/1.0'), '421 {"error":"Misdirected request"}', 'no Host at all (HTTP/1.0): 421')
  t.match(await raw(`GET /.well-known/jwks.json HTTP/1.1\r\nHost: 127.0.0.1:${port}`), /^200 \{"keys":\[/, 'its own address: 200')
  t.match(await raw(`GET /.well-known/jwks.json HTTP/1.1\r\nHost: localhost:${port}`), /^200 \{"keys":\[/, 'localhost: 200')
})

t.test('unknown routes and methods answer 404 Not found', async (t) => {
  const idp = await devIdp(t)
  for (const [method, url] of [['GET', '/'], ['GET', '/token'], ['POST', '/.well-known/jwks.json'], ['GET', '/v2/oauth/userinfo/x']] as const) {
    const response = await idp.inject({ method, url })
    t.same({ status: response.statusCode, body: response.json() }, { status: 404, body: { error: 'Not found' } }, `${method} ${url}`)
  }
})

t.test('GET /v2/oauth/userinfo answers for its own tokens, whatever their audience', async (t) => {
  const idp = await devIdp(t)
  const token = await accessToken(idp, { sub: 'dave', role: 'Moderator', name: 'Dave' })
  const response = await idp.inject({ url: '/v2/oauth/userinfo', headers: { authorization: `Bearer ${token}` } })
  t.equal(response.statusCode, 200)
  t.equal(response.headers['cache-control'], 'no-store')
  t.same(response.json(), { sub: 'dave', email: 'dave@example.com', name: 'Dave', role: 'Moderator' })

  const otherAudience = await accessToken(idp, { sub: 'erin', role: 'Owner', aud: 'another-api' })
  t.same(await userinfo(idp, `bearer ${otherAudience}`), {
    status: 200, body: { sub: 'erin', email: 'erin@example.com', name: 'erin', role: 'Owner' }, challenge: undefined
  })
})

t.test('GET /v2/oauth/userinfo answers 401 for anything but its own valid token', async (t) => {
  const idp = await devIdp(t)
  const unauthorized = { error: 'Invalid or missing token' }
  const token = await accessToken(idp, { sub: 'frank', role: 'Admin' })
  const foreignKey = await accessToken(await devIdp(t), { sub: 'frank', role: 'Admin' })
  const [header, payload] = token.split('.')

  t.same(await userinfo(idp), { status: 401, body: unauthorized, challenge: 'Bearer' }, 'no header')
  t.same(await userinfo(idp, 'Basic YWxpY2U6c2VjcmV0'), { status: 401, body: unauthorized, challenge: 'Bearer' }, 'another scheme')
  t.same(await userinfo(idp, `Bearer  ${token}`), { status: 401, body: unauthorized, challenge: 'Bearer' }, 'two spaces')
  const invalid = { status: 401, body: unauthorized, challenge: 'Bearer error="invalid_token"' }
  t.same(await userinfo(idp, 'Bearer not-a-jwt'), invalid, 'garbage')
  t.same(await userinfo(idp, `Bearer ${foreignKey}`), invalid, 'signed by another key')
  t.same(await userinfo(idp, `Bearer ${header}.${payload}.`), invalid, 'signature stripped')
})

t.test('GET /v2/oauth/userinfo refuses its own key under another issuer', async (t) => {
  const dataDir = t.testdir()
  const other = await devIdp(t, dataDir, 'http://127.0.0.1:4000')
  const idp = await devIdp(t, dataDir)
  const token = await accessToken(other, { sub: 'gina', role: 'Admin' })
  t.same(await userinfo(idp, `Bearer ${token}`), {
    status: 401, body: { error: 'Invalid or missing token' }, challenge: 'Bearer error="invalid_token"'
  })
})

t.test('the key pair is persisted with mode 0600 and shared by instances on one directory', async (t) => {
  const dataDir = t.testdir()
  const first = await devIdp(t, dataDir)
  const token = await accessToken(first, { sub: 'hana', role: 'User' })
  await first.close()

  const file = join(dataDir, 'keys.json')
  t.equal((await stat(file)).mode & 0o777, 0o600)
  t.equal((await stat(dataDir)).isDirectory(), true)
  const stored = JSON.parse(await readFile(file, 'utf8'))
  t.match(stored, { kid: String, privateJwk: { kty: 'RSA', d: String }, publicJwk: { kty: 'RSA', kid: stored.kid, alg: 'RS256', use: 'sig' } })

  const second = await devIdp(t, dataDir)
  t.same((await second.inject('/.well-known/jwks.json')).json(), { keys: [stored.publicJwk] })
  t.same(await userinfo(second, `Bearer ${token}`), {
    status: 200, body: { sub: 'hana', email: 'hana@example.com', name: 'hana', role: 'User' }, challenge: undefined
  })

  const elsewhere = await devIdp(t)
  t.not((await elsewhere.inject('/.well-known/jwks.json')).json().keys[0].kid, stored.kid, 'another directory, another key')
})

t.test('loadOrCreateKeys agrees on one key pair when called concurrently', async (t) => {
  const dataDir = join(t.testdir(), 'nested', 'dev-idp')
  const loaded = await Promise.all([loadOrCreateKeys(dataDir), loadOrCreateKeys(dataDir), loadOrCreateKeys(dataDir)])
  t.same(new Set(loaded.map((keys) => keys.kid)).size, 1)
  t.equal((await stat(dataDir)).mode & 0o777, 0o700)
})

t.test('loadOrCreateKeys refuses a file that is not a key file', async (t) => {
  const dataDir = t.testdir({ 'keys.json': JSON.stringify({ hello: 'world' }) })
  await t.rejects(loadOrCreateKeys(dataDir), { message: /keys\.json is not a development identity provider key file/ })
  await writeFile(join(dataDir, 'keys.json'), '{')
  await t.rejects(loadOrCreateKeys(dataDir), SyntaxError)
})

t.test('createTokenSigner and mintToken sign without HTTP, verifiable with the served key set', async (t) => {
  const dataDir = t.testdir()
  const keys = await loadOrCreateKeys(dataDir)
  const sign = createTokenSigner(keys, { issuer: ISSUER, audience: AUDIENCE })
  const issued = await Promise.all(Array.from({ length: 20 }, async (_, i) => await sign({ sub: `user-${i}`, role: 'User' })))
  t.equal(new Set(issued.map((token) => token.accessToken)).size, 20)
  t.same(issued.map((token) => token.expiresIn), Array(20).fill(3600))

  const idp = await devIdp(t, dataDir)
  const claims = await verifyWithJwks(idp, issued[7]?.accessToken ?? '')
  t.match(claims, { sub: 'user-7', role: 'User', email: 'user-7@example.com', name: 'user-7', iss: ISSUER, aud: AUDIENCE })

  const single = await mintToken(keys, { issuer: ISSUER, audience: AUDIENCE }, { sub: 'ivan', role: 'Owner', expiresIn: 120 })
  const singleClaims = await verifyWithJwks(idp, single)
  t.equal((singleClaims.exp ?? 0) - (singleClaims.iat ?? 0), 120)
  t.equal(singleClaims.role, 'Owner')
})
