import t from 'tap'
import type { LightMyRequestResponse } from 'fastify'
import type { App } from '../../src/app.js'
import { build } from '../helpers/build.js'
import { createAuthor, createMessages } from '../helpers/fixtures.js'
import { REST_OF_WINDOW, restOfWindow } from '../helpers/rate-limit.js'

// CONTRACT 12 "Browsers": CORS_ORIGINS decides which origins get CORS headers.
const APP = 'https://app.example.com'
const OTHER = 'https://evil.example.net'

const EXPOSED = 'ETag, Link, Location, Retry-After, Idempotent-Replayed, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, X-Request-Id'
const PREFLIGHT = {
  'access-control-allow-origin': APP,
  'access-control-allow-methods': 'GET, HEAD, POST, DELETE, OPTIONS',
  'access-control-allow-headers': 'Authorization, Content-Type, Idempotency-Key, If-None-Match, Last-Event-ID, X-Request-Id',
  'access-control-expose-headers': EXPOSED,
  'access-control-max-age': '600'
}
const SIMPLE = { 'access-control-allow-origin': APP, 'access-control-expose-headers': EXPOSED }
const NOT_FOUND = { error: 'Not found' }

/** Every Access-Control-* header of a response. */
function corsHeaders (res: LightMyRequestResponse): Record<string, string> {
  return Object.fromEntries(Object.entries(res.headers).filter(([name]) => name.startsWith('access-control-')).map(([name, value]) => [name, String(value)]))
}

const varyList = (res: LightMyRequestResponse): string[] => String(res.headers.vary ?? '').split(',').map((v) => v.trim().toLowerCase()).filter((v) => v !== '')

function preflight (app: App, origin: string | undefined, url = '/v2/messages', method = 'POST') {
  const headers: Record<string, string> = {
    'access-control-request-method': method,
    'access-control-request-headers': 'authorization,content-type,idempotency-key'
  }
  if (origin !== undefined) headers.origin = origin
  return app.inject({ method: 'OPTIONS', url, headers })
}

t.test('a listed origin: preflights are answered 204 before authentication', async (t) => {
  const app = await build(t, { config: { corsOrigins: [APP, 'http://localhost:5173'] } })

  for (const [url, method] of [['/v2/messages', 'POST'], ['/v2/messages/1', 'DELETE'], ['/v2/users/me', 'GET']] as const) {
    const res = await preflight(app, APP, url, method)
    t.equal(res.statusCode, 204, `${method} ${url}: 204, no token needed`)
    t.equal(res.body, '', 'no body')
    t.equal(res.headers['content-length'], '0')
    t.same(corsHeaders(res), PREFLIGHT, 'exactly the allowed methods, headers, exposed headers and max age')
    t.notOk(res.headers['access-control-allow-credentials'], 'never credentials')
    t.same(varyList(res), ['accept-encoding', 'origin'], 'Vary: Origin, after the Accept-Encoding every response carries')
    t.equal(res.headers['cross-origin-resource-policy'], 'cross-origin')
    t.equal(res.headers['x-content-type-options'], 'nosniff', 'the security headers are on the preflight too')
    t.ok(res.headers['x-request-id'])
  }
  const second = await preflight(app, 'http://localhost:5173')
  t.equal(second.statusCode, 204)
  t.equal(second.headers['access-control-allow-origin'], 'http://localhost:5173', 'every listed origin is allowed, each answered with itself')
})

t.test('an unlisted origin, or none: no CORS headers, and no preflight allows anything', async (t) => {
  const app = await build(t, { config: { corsOrigins: [APP] } })

  for (const origin of [OTHER, 'https://app.example.com.evil.example.net', 'http://app.example.com', 'null', undefined]) {
    const res = await preflight(app, origin)
    t.equal(res.statusCode, 404, `preflight from ${origin ?? 'no origin'}: the not-found answer`)
    t.same(res.json(), NOT_FOUND)
    t.same(corsHeaders(res), {}, 'no Access-Control-* header at all')
    t.equal(res.headers['cross-origin-resource-policy'], 'same-origin', 'CORP stays same-origin')
  }

  const author = await createAuthor(app, 'alice')
  await createMessages(app, author.id, 1)
  for (const origin of [OTHER, undefined]) {
    const res = await app.inject({ url: '/v2/messages', headers: origin === undefined ? {} : { origin } })
    t.equal(res.statusCode, 200, `GET from ${origin ?? 'no origin'} is served as before`)
    t.match(res.json(), { data: [{ content: 'message 1' }], pagination: { total: 1 } })
    t.same(corsHeaders(res), {}, 'no Access-Control-* header at all')
    t.equal(res.headers['cross-origin-resource-policy'], 'same-origin', 'CORP stays same-origin')
    t.ok(varyList(res).includes('origin'), 'Vary: Origin, so no cache hands this answer to an allowed origin')
  }
})

t.test('a listed origin: responses carry Allow-Origin, exactly the exposed headers, and a relaxed CORP', async (t) => {
  const app = await build(t, { testAuth: true, config: { corsOrigins: [APP] } })
  const author = await createAuthor(app, 'alice')
  await createMessages(app, author.id, 3)

  const list = await app.inject({ url: '/v2/messages?limit=1', headers: { origin: APP } })
  t.equal(list.statusCode, 200)
  t.same(corsHeaders(list), SIMPLE, 'Allow-Origin and Expose-Headers only: the preflight headers are not on other answers')
  t.ok(varyList(list).includes('origin'), 'Vary: Origin')
  t.equal(list.headers['cross-origin-resource-policy'], 'cross-origin', 'CORP relaxed for the allowed origin')
  t.equal(list.headers['x-content-type-options'], 'nosniff', 'the other security headers stay')

  const created = await app.inject({
    method: 'POST',
    url: '/v2/messages',
    headers: { origin: APP, 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User' }) },
    payload: { content: 'from the browser' }
  })
  t.equal(created.statusCode, 201)
  t.same(corsHeaders(created), SIMPLE)
  t.match(created.headers.location, /^\/v2\/messages\/\d+$/, 'Location, which the browser may read')

  const head = await app.inject({ method: 'HEAD', url: '/v2/messages', headers: { origin: APP } })
  t.same(corsHeaders(head), SIMPLE, 'HEAD too')
})

t.test('a listed origin can read error answers: 401, 404 and 429 carry the CORS headers', async (t) => {
  const app = await build(t, { config: { corsOrigins: [APP], rateLimitMax: 2 } })

  const unauthorized = await app.inject({ method: 'POST', url: '/v2/messages', headers: { origin: APP }, payload: { content: 'x' } })
  t.equal(unauthorized.statusCode, 401)
  t.same(unauthorized.json(), { error: 'Invalid or missing token' })
  t.same(corsHeaders(unauthorized), SIMPLE)
  t.equal(unauthorized.headers['cross-origin-resource-policy'], 'cross-origin')

  const missing = await app.inject({ url: '/no-such-route', headers: { origin: APP } })
  t.equal(missing.statusCode, 404)
  t.same(missing.json(), NOT_FOUND)
  t.same(corsHeaders(missing), SIMPLE)

  for (let i = 0; i < 2; i++) await app.inject({ url: '/v2/movies?limit=1', headers: { origin: APP } })
  const limited = await app.inject({ url: '/v2/movies?limit=1', headers: { origin: APP } })
  t.equal(limited.statusCode, 429, 'the third request of the minute')
  t.same(limited.json(), { error: 'Too many requests' })
  t.same(corsHeaders(limited), SIMPLE, 'so the browser can read Retry-After and the rate-limit headers')
  t.same([restOfWindow(limited.headers['retry-after']), limited.headers['x-ratelimit-limit'], limited.headers['x-ratelimit-remaining']], [REST_OF_WINDOW, '2', '0'])

  const preflightWhileLimited = await preflight(app, APP)
  t.equal(preflightWhileLimited.statusCode, 204, 'preflights are answered before the rate limit')
})

t.test('CORS_ORIGINS=*: any origin, Allow-Origin *, never credentials', async (t) => {
  const app = await build(t, { config: { corsOrigins: '*' } })

  const res = await preflight(app, OTHER)
  t.equal(res.statusCode, 204)
  t.same(corsHeaders(res), { ...PREFLIGHT, 'access-control-allow-origin': '*' })
  t.equal(res.headers['cross-origin-resource-policy'], 'cross-origin')

  const list = await app.inject({ url: '/v2/movies?limit=1', headers: { origin: 'http://localhost:3000' } })
  t.equal(list.statusCode, 200)
  t.same(corsHeaders(list), { ...SIMPLE, 'access-control-allow-origin': '*' })
  t.equal(list.headers['cross-origin-resource-policy'], 'cross-origin')

  const plain = await app.inject({ url: '/v2/movies?limit=1' })
  t.same(corsHeaders(plain), {}, 'a request without Origin gets none')
  t.equal(plain.headers['cross-origin-resource-policy'], 'same-origin')
  const options = await app.inject({ method: 'OPTIONS', url: '/v2/movies' })
  t.equal(options.statusCode, 404, 'an OPTIONS without Origin is no preflight')
  t.same(options.json(), NOT_FOUND)
})

t.test('CORS_ORIGINS unset: no CORS headers at all', async (t) => {
  const app = await build(t)

  const res = await preflight(app, APP)
  t.equal(res.statusCode, 404)
  t.same(res.json(), NOT_FOUND)
  t.same(corsHeaders(res), {})

  const list = await app.inject({ url: '/v2/movies?limit=1', headers: { origin: APP } })
  t.equal(list.statusCode, 200)
  t.same(corsHeaders(list), {})
  t.notOk(varyList(list).includes('origin'), 'no Vary: Origin either')
  t.equal(list.headers['cross-origin-resource-policy'], 'same-origin')
})
