// Hostile input at scale (docs/security.md, "Hostile input", CONTRACT 16): random bodies, query strings, path ids
// and headers, huge, deeply nested, not UTF-8, holding lone surrogates, NUL and numbers at the edges of
// their types, with and without Idempotency-Key, thrown at every route the app registers, in
// production mode; and forged cursors and sync tokens. None may produce a 5xx, no error body may carry
// a stack, a path, SQL text or a driver message, each answer writes exactly what it says (one message
// per 201 that is not a replay, nothing for a 4xx), and no Link or Location holds bytes of the
// client's making. Replay a failure with FAST_CHECK_SEED=<seed printed below>.
import { createServer, STATUS_CODES } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { sql } from 'drizzle-orm'
import fc from 'fast-check'
import t from 'tap'
import { BODY_LIMIT, buildApp, type App } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { freshDatabase } from '../helpers/database.js'
import { queryRows } from '../helpers/fixtures.js'
import { startTestIdp } from '../helpers/idp.js'
import { scaled } from '../helpers/scale.js'

const AUDIENCE = 'messages-api-fuzz'
const SEED = Number(process.env.FAST_CHECK_SEED ?? 20260517)
if (!Number.isSafeInteger(SEED)) throw new Error('FAST_CHECK_SEED must be an integer')
// Runs per route and method; fewer where the input barely matters (HEAD, the static docs assets).
// A third of them by default, all at TEST_PROPERTY_SCALE=3 (CI's PostgreSQL pass).
const RUNS = scaled(100 / 3)
const LIGHT_RUNS = scaled(15 / 3)
const RAW_RUNS = scaled(400 / 3)
const UTF8_RUNS = scaled(60 / 3)

// The public messages of src/errors.ts and the standard reasons Fastify's own 4xx fall back to.
const PUBLIC_ERROR = new RegExp('^(' + [
  'Invalid or missing token', 'Insufficient permissions', '(Message|User) not found', 'Not found',
  'Parameter "\\w+" must be a positive integer', 'Missing required query parameter: \\w+', 'Malformed JSON body',
  'Request body too large', 'Unsupported media type', 'Too many requests', 'Validation failed',
  'Invalid Idempotency-Key header', 'Idempotency-Key was used with a different request', 'A request with this Idempotency-Key is in progress',
  'Invalid cursor', 'Invalid sync token', 'Sync token expired'
].join('|') + ')$')
const STATUS_REASONS = new Set(Object.values(STATUS_CODES))
// A stack frame, a source path, SQL text or a driver's words (postgres.js and PGlite).
const LEAK = /\bat .+[(:]\d+|\/work\/|node_modules|\.ts\b|\.js:\d|\bselect\b.+\bfrom\b|\binsert into\b|\bwhere\b.+=|relation "|column "|syntax error|invalid input syntax|violates|duplicate key|invalid byte sequence|postgres|pglite|drizzle|errno|ECONN|stack/i

interface Route { method: string, path: string, protected: boolean }

/** Every route the app registers, read from Fastify's own route tree (so a new route is fuzzed too). */
function registeredRoutes (app: App): Route[] {
  const document = app.swagger() as { paths: Record<string, Record<string, { security?: unknown[] }>> }
  const routes: Route[] = []
  const stack: string[] = []
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    if (line.trim() === '') continue
    const match = /^((?:│ {3}| {4})*)(?:├── |└── )(.+?)(?: \(([A-Z, ]+)\))?$/.exec(line)
    if (match === null) throw new Error(`unexpected route tree line: ${line}`)
    stack.length = (match[1] ?? '').length / 4
    stack.push(match[2] ?? '')
    const path = stack.join('')
    for (const method of (match[3] ?? '').split(', ').filter(Boolean)) {
      const documented = path.replace(/:(\w+)/g, '{$1}').replace(/(.)\/$/, '$1')
      const operation = document.paths[documented]?.[method === 'HEAD' ? 'get' : method.toLowerCase()]
      routes.push({ method, path, protected: (operation?.security?.length ?? 0) > 0 })
    }
  }
  return routes
}

// ---- arbitraries ----------------------------------------------------------------------------------

const encode = (value: string): string => {
  try {
    return encodeURIComponent(value)
  } catch {
    // A lone surrogate cannot be percent-encoded as UTF-8; send its escape as text instead.
    return escape(value)
  }
}

const oddStrings = fc.constantFrom(
  '', ' ', '\t\n', '\u0000', 'a\u0000b', '\ud800', '\udfff', '\u202e\u0041', '\ufeff', '\uffff', 'é', '北京', '🌧',
  "'; drop table messages; --", '" or 1=1 --', '%', '%_\\', '\\', '{{7*7}}', '$' + '{jndi:x}', '__proto__', 'constructor',
  '../../etc/passwd', '<script>alert(1)</script>', 'null', 'undefined', 'NaN'
)
// Text JSON can carry and PostgreSQL cannot store as sent (CONTRACT 16): lone UTF-16 surrogates,
// leading and trailing halves, alone or amid ordinary text and pairs, and NUL.
const loneSurrogate = fc.oneof(fc.integer({ min: 0xd800, max: 0xdbff }), fc.integer({ min: 0xdc00, max: 0xdfff })).map((c) => String.fromCharCode(c))
const unstorable = fc.array(fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }) },
  { weight: 2, arbitrary: loneSurrogate },
  { weight: 1, arbitrary: fc.constantFrom('\u0000', '\ud83d\ude00', '\ude00\ud83d', ' ') }
), { minLength: 1, maxLength: 6 }).map((parts) => parts.join(''))
const text = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  oddStrings,
  unstorable,
  fc.integer({ min: 190, max: 4_010 }).map((n) => 'y'.repeat(n))
)
// Numbers at the edges of what JavaScript, int4, bigint and float8 hold, as JSON writes them.
const edgeNumber = fc.constantFrom('9007199254740991', '9007199254740992', '-9007199254740993', '2147483647', '2147483648', '-2147483649',
  '9223372036854775807', '9223372036854775808', '18446744073709551616', '1e308', '-1e308', '5e-324', '1e400', '-1e400', '1e-400', '-0',
  '123456789012345678901234567890.5', '0.1')
const numberText = fc.oneof(
  fc.integer().map(String),
  fc.double().map(String),
  fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }).map(String),
  fc.constantFrom('0', '-0', '1', '-1', '1.5', '2.5', '1e400', '-1e400', '1e-400', 'NaN', 'Infinity', '0x10', '0b1', '  3 ',
    '9007199254740991', '9007199254740992', '00000001', '+1', '1_000')
)
const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  text, fc.integer(), fc.double(), fc.boolean(), fc.constant(null),
  fc.array(text, { maxLength: 3 }), fc.dictionary(text, text, { maxKeys: 3 }), fc.jsonValue({ maxDepth: 3 })
)

// Nested thousands deep, within the body limit or past it: the whole body, an unknown member of a
// valid create, or a member the schema knows.
const nested = fc.record({
  depth: fc.integer({ min: 500, max: 30_000 }),
  kind: fc.constantFrom('object', 'array', 'mixed', 'unbalanced', 'known', 'known-object', 'unknown-array')
}).map(({ depth, kind }) => {
  if (kind === 'object') return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)
  if (kind === 'array') return '['.repeat(depth) + ']'.repeat(depth)
  if (kind === 'mixed') return `{"content":"deep","extra":${'[{"a":'.repeat(depth)}0${'}]'.repeat(depth)}}`
  if (kind === 'known') return `{"content":${'['.repeat(depth)}${']'.repeat(depth)},"name":${'['.repeat(depth)}"x"${']'.repeat(depth)},"email":"x"}`
  if (kind === 'known-object') return `{"content":"x","subject":${'{"s":'.repeat(Math.floor(depth / 10))}1${'}'.repeat(Math.floor(depth / 10))},"name":"x","email":"x"}`
  if (kind === 'unknown-array') return `{"content":"deep ${depth}","name":"n","email":"e","x":${'['.repeat(depth)}${']'.repeat(depth)}}`
  return '{"content":'.repeat(depth)
})
// Creates whose text PostgreSQL cannot store as sent, and numbers at the edges where a string is due.
const unstorableBody = fc.record({
  content: fc.oneof(unstorable, fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 })),
  subject: fc.option(unstorable, { nil: undefined }),
  name: fc.option(unstorable, { nil: undefined }),
  email: fc.option(unstorable, { nil: undefined })
}, { requiredKeys: ['content'] }).map((body) => JSON.stringify(body))
const edgeNumberBody = fc.tuple(fc.constantFrom('content', 'subject', 'priority', 'name', 'email'), edgeNumber)
  .map(([field, number]) => `{"content":"n","name":"n","email":"e",${JSON.stringify(field)}:${number}}`)
// JSON bodies of exactly n bytes, around the 100 KiB limit.
const nearLimit = fc.integer({ min: BODY_LIMIT - 64, max: BODY_LIMIT + 64 })
  .chain((n) => fc.constantFrom('content', 'name').map((field) => `{"${field}":"${'x'.repeat(n - field.length - 7)}"}`))
const fieldBody = fc.record({
  content: anyValue,
  subject: anyValue,
  priority: fc.oneof(fc.constantFrom('low', 'normal', 'high', 'urgent', 'URGENT', ''), anyValue),
  name: anyValue,
  email: anyValue,
  role: anyValue
}, { requiredKeys: [] }).map((body) => JSON.stringify(body))
const specialBodies = fc.constantFrom(
  '{"content":"hello from the fuzzer"}', '{"name":"Fuzz","email":"fuzz@example.com"}',
  '{"__proto__":{"role":"Owner"},"content":"proto"}', '{"constructor":{"prototype":{"x":1}},"content":"c"}',
  '{"content":"a","content":"b"}', '\ufeff{"content":"bom"}', 'null', '[]', '"text"', '1e999', 'true', '{', '}', '{"content":',
  '{"content":"\\u0000"}', '{"content":"\\ud800"}', '{"content":"x","subject":"\\u0000"}', '{"name":"\\u0000","email":"\\u0000"}',
  '{"content":"\\/\\/\\b\\f"}', '{"content" : "spaced" }', '{"content":"x"}garbage', '\u0000', ' '
)
// Bodies close enough to valid that they reach the handlers and the database.
const plausibleBody = fc.record({
  content: fc.oneof(text, fc.string({ unit: 'grapheme', minLength: 1, maxLength: 200 })),
  subject: fc.option(text, { nil: undefined }),
  priority: fc.option(fc.constantFrom('low', 'normal', 'high', 'urgent'), { nil: undefined }),
  name: fc.option(text, { nil: undefined }),
  email: fc.option(text, { nil: undefined })
}, { requiredKeys: ['content'] }).map((body) => JSON.stringify(body))
const body = fc.option(fc.oneof(
  { weight: 4, arbitrary: plausibleBody },
  { weight: 3, arbitrary: fieldBody },
  { weight: 2, arbitrary: specialBodies },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 6 }).map((value) => JSON.stringify(value)) },
  { weight: 2, arbitrary: nested },
  { weight: 3, arbitrary: unstorableBody },
  { weight: 1, arbitrary: edgeNumberBody },
  { weight: 1, arbitrary: nearLimit },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 300 }) }
), { freq: 5 })

const contentType = fc.option(fc.oneof(
  { weight: 12, arbitrary: fc.constant('application/json') },
  {
    weight: 3,
    arbitrary: fc.constantFrom('application/json; charset=utf-8', 'application/json; charset=latin1', 'application/json; charset=utf-16',
      'APPLICATION/JSON', 'application/json;;', 'application/jsonx', 'application/problem+json', 'text/plain', 'text/html',
      'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/octet-stream', '*/*', ';', '')
  },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 60 }) }
), { freq: 8 })

const queryKey = fc.oneof(
  fc.constantFrom('page', 'limit', 'sort', 'order', 'priority', 'authorId', 'subject', 'q', 'city', 'genre', 'year', 'minRating',
    'role', 'page[]', 'sort[0]', '__proto__', 'constructor', ''),
  text.map(encode)
)
const queryValue = fc.oneof(
  numberText.map(encode),
  text.map(encode),
  fc.constantFrom('%', '%%', '%zz', '%E0%A4%A', '%FF%FE', '%C0%AF', '%00', '%u0041', '%2', '%%32%35', '%ED%A0%80', '+', '&', '='),
  fc.integer({ min: 1_000, max: 8_000 }).map((n) => 'q'.repeat(n)),
  fc.constantFrom('low', 'urgent', 'desc', 'asc', 'DESC', 'createdAt', 'title', 'rating', 'Admin', 'Drama', 'London', 'hello')
)
// Query strings with the parameters the routes read, each given a plausible or a hostile value.
const plausibleQuery = fc.record({
  page: numberText,
  limit: numberText,
  sort: fc.oneof(fc.constantFrom('id', 'createdAt', 'priority', 'subject', 'title', 'year', 'rating', 'genre', 'name', 'email', 'role'), text),
  order: fc.oneof(fc.constantFrom('asc', 'desc', 'DESC'), text),
  q: fc.oneof(fc.constantFrom('seed', 'hello', '%', '_', '\\'), text),
  city: fc.oneof(fc.constantFrom('London', 'São Paulo'), text),
  priority: fc.oneof(fc.constantFrom('low', 'normal', 'high', 'urgent'), text),
  subject: text,
  authorId: numberText,
  genre: fc.oneof(fc.constantFrom('Drama', 'Sci-Fi'), text),
  year: numberText,
  minRating: numberText,
  role: fc.oneof(fc.constantFrom('User', 'Moderator', 'Admin', 'Owner'), text)
}, { requiredKeys: [] }).map((params) => '?' + Object.entries(params).map(([k, v]) => `${k}=${encode(v)}`).join('&'))
const query = fc.oneof(
  { weight: 1, arbitrary: fc.constant('') },
  { weight: 5, arbitrary: plausibleQuery },
  {
    weight: 5,
    arbitrary: fc.tuple(fc.array(fc.tuple(queryKey, queryValue), { maxLength: 8 }), fc.constantFrom('&', '&&', ';', '&=&'))
      .map(([pairs, separator]) => '?' + pairs.map(([k, v]) => `${k}=${v}`).join(separator))
  },
  { weight: 1, arbitrary: fc.constantFrom('?', '??', '?&', '?=', '?=&=', '?page', '?q', '?city', '?a[b][c]=1', '?' + 'page=1&'.repeat(500)) }
)

const pathValue = (ids: readonly number[]): fc.Arbitrary<string> => fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom(...ids.map(String)) },
  { weight: 2, arbitrary: numberText.map(encode) },
  {
    weight: 2,
    arbitrary: fc.constantFrom('..', '.', '%2e%2e', '..%2F..%2Fpackage.json', '%2F', '%2f%2f', '%5C', '%00', '%FF', '%C0%AF', '%',
      '%%', '%zz', '%E2%80%AE', 'a%20b', '~', '@', ':id', '*', 'London', 'S%C3%A3o%20Paulo', '%E5%8C%97%E4%BA%AC',
      '%ED%A0%80', '%ED%BF%BF', '1%', '1%E2%82', '%F4%90%80%80')
  },
  { weight: 2, arbitrary: text.filter((value) => value !== '').map(encode) },
  { weight: 1, arbitrary: fc.integer({ min: 100, max: 4_000 }).map((n) => '9'.repeat(n)) }
)
const wildcardTail = fc.oneof(
  fc.constantFrom('', 'index.css', 'swagger-ui.css', 'swagger-ui-bundle.js', 'favicon-32x32.png', 'static/logo.svg',
    '..%2F..%2Fpackage.json', '%2e%2e/%2e%2e/package.json', 'static/..%2F..%2F..%2Fpackage.json', '....//....//etc/passwd',
    'static/%00', 'static/%FF', '%2Fetc%2Fpasswd'),
  text.map(encode)
)

interface ValidAuth { kind: 'valid', role: string, header: string }
type Auth = ValidAuth | { kind: 'invalid', header: string | undefined }

interface HttpRequest {
  route: Route
  method: string
  url: string
  auth: Auth
  headers: Record<string, string>
  body: string | undefined
}

// A real header value Node accepts: printable ASCII and tab.
const headerValue = fc.oneof(
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 80 }),
  fc.integer({ min: 1_000, max: 8_000 }).map((n) => 'h'.repeat(n)),
  fc.constantFrom('', ' ', '\t', 'null', '{}', '[]', '../..', '%00', 'gzip', 'chunked', '127.0.0.1, 10.0.0.1', 'unknown')
)
const headerName = fc.oneof(
  fc.constantFrom('x-request-id', 'accept', 'accept-encoding', 'accept-language', 'x-forwarded-for', 'x-forwarded-proto',
    'x-forwarded-host', 'x-real-ip', 'content-encoding', 'origin', 'referer', 'cookie', 'if-none-match', 'range', 'expect'),
  fc.stringMatching(/^x-[a-z0-9-]{1,20}$/)
)

// ---- the app under test -------------------------------------------------------------------------

const idp = await startTestIdp(t, { audience: AUDIENCE })
// A weather upstream on loopback that always answers, so the weather routes reach their handlers.
const upstream = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' })
  res.end('{"name":"Fuzzville","main":{"temp":20},"cod":200}')
})
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => { upstream.closeAllConnections(); upstream.close(() => resolve()) }))

const database = await freshDatabase()
// Production, as NODE_ENV=production configures it; no rate limit or load shedding, which would
// answer 429/503 to the sheer volume rather than to the content of the requests.
const config = loadConfig({
  NODE_ENV: 'production',
  AUTH_ISSUER: idp.url,
  API_AUDIENCE: AUDIENCE,
  ...(database.dataDir === undefined ? { DATABASE_URL: database.url } : {}),
  WEATHER_API_KEY: 'fuzz-key',
  WEATHER_API_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/data/2.5/weather`,
  RATE_LIMIT_MAX: '0',
  MAX_EVENT_LOOP_DELAY_MS: '0',
  LOG_LEVEL: 'silent'
})
const app = await buildApp(config, { logger: false, dataDir: database.dataDir })
t.teardown(async () => {
  await app.close()
  await database.drop()
})
await app.listen({ host: '127.0.0.1', port: 0 })
const port = (app.server.address() as AddressInfo).port

const signed = async (sub: string, role: string): Promise<ValidAuth> =>
  ({ kind: 'valid', role, header: `Bearer ${await idp.sign({ sub, role, email: `${sub}@example.com`, name: sub })}` })
const validAuth = [await signed('fuzz-user', 'User'), await signed('fuzz-moderator', 'Moderator'), await signed('fuzz-admin', 'Admin')]
const userToken = validAuth[0]!.header.slice('Bearer '.length)
const [head, payload, signature] = userToken.split('.') as [string, string, string]
const forged = (claims: Record<string, unknown>): string =>
  `${head}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), ...claims })).toString('base64url')}.${signature}`
const invalidHeaders = [
  'Bearer', 'Bearer ', 'Bearer  ' + userToken, 'Basic YWxhZGRpbjpvcGVuc2VzYW1l', 'Token ' + userToken, userToken,
  'Bearer ' + userToken + 'x', 'Bearer ' + forged({ role: 'Owner' }), 'Bearer ' + forged({ exp: 1 }), 'Bearer a.b.c', 'Bearer ...',
  'Bearer ' + await idp.sign({ sub: 'none' }, { alg: 'none' }),
  'Bearer ' + await idp.sign({ sub: 'hs' }, { hs256WithPublicKey: true }),
  'Bearer ' + await idp.sign({ sub: 'expired' }, { expiresIn: -60 }),
  'Bearer ' + await idp.sign({ sub: 'aud' }, { aud: 'someone-else' }),
  'Bearer ' + await idp.sign({ sub: 'foreign' }, { key: 'foreign' }),
  'Bearer ' + await idp.sign({ sub: 'jku' }, { kid: 'nope', header: { jku: 'http://127.0.0.1:9/jwks.json' } }),
  'Bearer ' + 'A'.repeat(8_000)
]
const auth: fc.Arbitrary<Auth> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...validAuth) },
  { weight: 2, arbitrary: fc.constant<Auth>({ kind: 'invalid', header: undefined }) },
  { weight: 2, arbitrary: fc.constantFrom(...invalidHeaders).map((header): Auth => ({ kind: 'invalid', header })) },
  { weight: 1, arbitrary: headerValue.map((value): Auth => ({ kind: 'invalid', header: `Bearer ${value}` })) }
)

// Messages that ids can hit, and the rows the run must account for.
const seeded: number[] = []
for (const [index, caller] of validAuth.entries()) {
  for (let i = 0; i < 3; i++) {
    const res = await app.inject({ method: 'POST', url: '/v2/messages', headers: { authorization: caller.header }, payload: { content: `seed ${index}.${i}` } })
    if (res.statusCode !== 201) throw new Error(`seeding failed: ${res.statusCode} ${res.body}`)
    seeded.push(res.json<{ id: number }>().id)
  }
}

const countRows = async (table: 'messages' | 'users' | 'movies'): Promise<number> =>
  (await queryRows<{ n: number }>(app.db, sql`select count(*)::int as n from ${sql.identifier(table)}`))[0]!.n
const before = { messages: await countRows('messages'), users: await countRows('users'), movies: await countRows('movies') }

// ---- checks -------------------------------------------------------------------------------------

interface Answer { status: number, contentType: string, body: string, replayed?: boolean, link?: string, location?: string }

const tally = { created: 0, deleted: 0, byRoute: new Map<string, Map<number, number>>(), validPastAuth: new Set<string>(), refused: new Set<string>() }
const routeKey = (route: Route): string => `${route.method} ${route.path}`

/** Throws (so fast-check reports and shrinks the request) when an answer breaks a rule. */
function check (request: HttpRequest, answer: Answer): void {
  const { route } = request
  const where = `${request.method} ${request.url.slice(0, 200)} -> ${answer.status} ${answer.body.slice(0, 300)}`
  const statuses = tally.byRoute.get(routeKey(route)) ?? new Map<number, number>()
  statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1)
  tally.byRoute.set(routeKey(route), statuses)

  if (answer.status >= 500) throw new Error(`a 5xx: ${where}`)
  if (request.auth.kind === 'valid' && answer.status === 401) throw new Error(`a valid token was refused: ${where}`)
  if (route.protected && request.auth.kind === 'valid' && answer.status !== 401) tally.validPastAuth.add(routeKey(route))
  if (route.protected && request.auth.kind === 'invalid') {
    // Without a valid token nothing behind authentication answers: no data, no 403, no validation details.
    if (answer.status < 400) throw new Error(`a protected route answered without a valid token: ${where}`)
    if (/Validation failed|Insufficient permissions/.test(answer.body)) throw new Error(`validation ran before authentication: ${where}`)
    if (answer.status === 401) tally.refused.add(routeKey(route))
  }
  // A replay is the stored 201 again: it creates nothing.
  if (route.method === 'POST' && route.path.startsWith('/v2/messages') && answer.status === 201 && answer.replayed !== true) tally.created++
  if (route.method === 'DELETE' && answer.status === 204) tally.deleted++
  if (answer.status === 200 && isCollection(route)) checkLinks(route, answer, where)
  // A Location (a creation's, a redirect's) is a URI reference: no byte of the request's own making.
  if (answer.location !== undefined && !URI_REFERENCE.test(answer.location)) throw new Error(`a Location of the client's making ${JSON.stringify(answer.location)}: ${where}`)

  if (answer.status < 400) return
  if (!answer.contentType.startsWith('application/json')) throw new Error(`a non-JSON error (${answer.contentType}): ${where}`)
  if (request.method === 'HEAD') return
  let parsed: unknown
  try {
    parsed = JSON.parse(answer.body)
  } catch {
    throw new Error(`an error body that is not JSON: ${where}`)
  }
  const error = (parsed as { error?: unknown }).error
  if (typeof error !== 'string') throw new Error(`no string error: ${where}`)
  const keys = Object.keys(parsed as object)
  if (keys.some((key) => key !== 'error' && key !== 'details')) throw new Error(`unexpected members ${keys.join(', ')}: ${where}`)
  const details = (parsed as { details?: unknown }).details
  if (details !== undefined && (error !== 'Validation failed' || !Array.isArray(details) || !details.every((d) => typeof d === 'string'))) {
    throw new Error(`details outside a validation failure: ${where}`)
  }
  if (!PUBLIC_ERROR.test(error) && !STATUS_REASONS.has(error)) throw new Error(`an error message that is not a public one: ${where}`)
  if (LEAK.test(answer.body)) throw new Error(`an error body that leaks: ${where}`)
}

const COLLECTION_PATHS = new Set(['/v2/messages', '/v2/messages/search', '/v2/users', '/v2/movies'])
const isCollection = (route: Route): boolean => (route.method === 'GET' || route.method === 'HEAD') && COLLECTION_PATHS.has(route.path.replace(/(.)\/$/, '$1'))
// A URI reference as RFC 3986 writes one: these characters, or percent-encoded octets.
const URI_REFERENCE = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*$/
// One Link entry as the service writes it: a reference no byte of the request could close, one rel.
const LINK_ENTRY = /^<([^<>"\s,;]+)>; rel="(first|prev|next|last)"$/

/** CONTRACT 12 and 16: every entry of a collection's Link is one link to the collection's own path, with one rel. */
function checkLinks (route: Route, answer: Answer, where: string): void {
  if (answer.link === undefined) throw new Error(`a collection 200 without Link: ${where}`)
  const rels = answer.link.split(', ').map((entry) => {
    const match = LINK_ENTRY.exec(entry)
    if (match === null) throw new Error(`a Link entry of the client's making ${JSON.stringify(entry)}: ${where}`)
    if (match[1]!.split('?')[0] !== route.path) throw new Error(`a Link to ${match[1]} from ${route.path}: ${where}`)
    return match[2]!
  })
  if (rels[0] !== 'first' || new Set(rels).size !== rels.length) throw new Error(`Link relations ${rels.join(', ')}: ${where}`)
}

/**
 * CONTRACT 16: a path parameter the router cannot decode (not UTF-8, a stray %) is the route's own
 * 400, never the router's generic one. For requests without a body, whose 400 can come from nothing else.
 */
function checkOwnRule (request: HttpRequest, answer: Answer): void {
  if (/:\w+/.test(request.route.path) && request.body === undefined && answer.status === 400 && answer.body === '{"error":"Bad Request"}') {
    throw new Error(`a generic 400 where the route has its own rule: ${request.method} ${request.url.slice(0, 200)}`)
  }
}

interface RowCounts { messages: number, keys: number, users: number }

const rowCounts = async (): Promise<RowCounts> => (await queryRows<{ messages: number, keys: number, users: number }>(app.db, sql`select
  (select count(*)::int from messages) as messages, (select count(*)::int from idempotency_keys) as keys, (select count(*)::int from users) as users`))[0]!

/**
 * What one answer may have written: one message per 201 that is not a replay (and its key, under an
 * Idempotency-Key), one fewer per 204; anything else writes nothing. Checked request by request, so
 * a create that wrote twice, or a 4xx that wrote at all, is the request fast-check reports.
 */
function checkWrites (request: HttpRequest, answer: Answer, before: RowCounts, after: RowCounts): void {
  const created = request.route.method === 'POST' && request.route.path.startsWith('/v2/messages') && answer.status === 201 && answer.replayed !== true
  const expected: RowCounts = {
    messages: before.messages + (created ? 1 : 0) - (request.route.method === 'DELETE' && answer.status === 204 ? 1 : 0),
    keys: before.keys + (created && request.headers['idempotency-key'] !== undefined ? 1 : 0),
    users: before.users
  }
  if (JSON.stringify(after) !== JSON.stringify(expected)) {
    throw new Error(`rows ${JSON.stringify(before)} -> ${JSON.stringify(after)}, expected ${JSON.stringify(expected)}: ${request.method} ${request.url.slice(0, 200)} -> ${answer.status} ${answer.body.slice(0, 300)}`)
  }
}

const fillPath = (route: Route, values: string[]): string => {
  let index = 0
  return route.path.replace(/:\w+|\*/g, () => values[index++] ?? '')
}

function httpRequest (route: Route): fc.Arbitrary<HttpRequest> {
  const slots = (route.path.match(/:\w+|\*/g) ?? []).map((slot) => slot === '*' ? wildcardTail : pathValue(seeded))
  return fc.record({
    values: fc.tuple(...slots.map((slot) => slot as fc.Arbitrary<string>)),
    query,
    auth,
    testUser: fc.option(fc.constant(JSON.stringify({ sub: 'fuzz-admin', role: 'Owner' })), { freq: 4 }),
    contentType,
    extra: fc.dictionary(headerName, headerValue, { maxKeys: 4 }),
    // A few keys again and again, so that replays (same body) and 422s (another body) happen too.
    idempotencyKey: fc.option(fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom('fuzz-1', 'fuzz-2', '"fuzz-3"') },
      { weight: 2, arbitrary: fc.stringMatching(/^[\x21-\x7e]{1,40}$/) },
      { weight: 1, arbitrary: fc.constantFrom('', ' ', 'a b', 'é', '"', 'x'.repeat(256)) }
    ), { freq: 3 }),
    body: route.method === 'GET' || route.method === 'HEAD' ? fc.option(body, { freq: 6 }).map((b) => b ?? undefined) : body.map((b) => b ?? undefined)
  }).map(({ values, query, auth, testUser, contentType, extra, idempotencyKey, body }) => {
    const headers: Record<string, string> = { ...extra }
    if (idempotencyKey !== null) headers['idempotency-key'] = idempotencyKey
    if (auth.header !== undefined) headers.authorization = auth.header
    // The production server ignores the test stub's header entirely (CONTRACT 4).
    if (testUser !== null) headers['x-test-user'] = testUser
    if (contentType !== null) headers['content-type'] = contentType
    return { route, method: route.method, url: fillPath(route, values) + query, auth, headers, body }
  })
}

async function inject (request: HttpRequest): Promise<Answer> {
  const res = await app.inject({
    method: request.method as 'GET',
    url: request.url,
    headers: request.headers,
    ...(request.body === undefined ? {} : { payload: request.body })
  })
  const { link, location } = res.headers
  return {
    status: res.statusCode,
    contentType: String(res.headers['content-type'] ?? ''),
    body: res.body,
    replayed: res.headers['idempotent-replayed'] === 'true',
    ...(link === undefined ? {} : { link: String(link) }),
    ...(location === undefined ? {} : { location: String(location) })
  }
}

// ---- raw bytes over a real socket, where inject cannot express them -----------------------------

interface RawRequest { route: Route, auth: Auth, bytes: Buffer, label: string }

const highBytes = fc.uint8Array({ minLength: 1, maxLength: 40 }).map((bytes) => Buffer.from(bytes.map((b) => 0x80 | b)))
const anyBytes = fc.uint8Array({ minLength: 1, maxLength: 60 }).map((bytes) => Buffer.from(bytes))
const invalidUtf8 = fc.constantFrom(
  Buffer.from([0xff]), Buffer.from([0xfe, 0xff]), Buffer.from([0xc0, 0xaf]), Buffer.from([0xe0, 0x80, 0xaf]), Buffer.from([0xed, 0xa0, 0x80]),
  Buffer.from([0xf4, 0x90, 0x80, 0x80]), Buffer.from([0xc3]), Buffer.from([0xe2, 0x82]), Buffer.from([0x80, 0x80, 0x80])
)
// Bytes an HTTP parser lets through in a request target (no controls, space, '?' or '#'), mostly high.
const targetBytes = fc.uint8Array({ minLength: 1, maxLength: 40 })
  .map((bytes) => Buffer.from(bytes.map((b) => b < 0x21 || b === 0x7f || b === 0x3f || b === 0x23 ? 0x80 | b : b)))
const rawText = fc.oneof(
  { weight: 3, arbitrary: targetBytes },
  { weight: 3, arbitrary: highBytes },
  { weight: 2, arbitrary: invalidUtf8 },
  { weight: 1, arbitrary: anyBytes },
  { weight: 1, arbitrary: fc.constantFrom(Buffer.from('../../../etc/passwd'), Buffer.from('..\\..\\'), Buffer.from('//')) }
)

const sometimes = <T>(arbitrary: fc.Arbitrary<T>): fc.Arbitrary<T | null> =>
  fc.oneof({ weight: 2, arbitrary: fc.constant(null) }, { weight: 1, arbitrary })

const rawRequest = (routes: Route[]): fc.Arbitrary<RawRequest> => fc.record({
  route: fc.constantFrom(...routes),
  auth,
  // Each part is raw only some of the time, so that requests with raw bytes in one place get past
  // the parser and the other checks and reach the handlers.
  pathPart: fc.oneof({ weight: 1, arbitrary: rawText }, { weight: 2, arbitrary: pathValue(seeded).map((v) => Buffer.from(v)) }),
  queryPart: sometimes(rawText),
  headerBytes: sometimes(fc.tuple(headerName, highBytes)),
  authBytes: sometimes(highBytes),
  contentType: fc.oneof(
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 6, arbitrary: fc.constant(Buffer.from('application/json')) },
    { weight: 2, arbitrary: highBytes.map((b) => Buffer.concat([Buffer.from('application/json; charset='), b])) }
  ),
  body: fc.option(fc.oneof(
    rawText.map((b) => Buffer.concat([Buffer.from('{"content":"'), b, Buffer.from('","name":"'), b, Buffer.from('","email":"x@y.z"}')])),
    rawText,
    fc.constant(Buffer.from('\ufeff{"content":"bom"}', 'utf16le')),
    fc.constant(Buffer.from('{"content":"utf-16"}', 'utf16le'))
  ), { freq: 4 }),
  framing: fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom('length', 'chunked') },
    { weight: 1, arbitrary: fc.constantFrom('double-length', 'bad-length', 'length-and-chunked', 'huge-header') }
  )
}).map(({ route, auth, pathPart, queryPart, headerBytes, authBytes, contentType, body, framing }) => {
  const lines: Buffer[] = []
  const slots = (route.path.match(/:\w+|\*/g) ?? []).length
  const pieces = route.path.split(/:\w+|\*/)
  const target = Buffer.concat([
    ...pieces.flatMap((piece, i) => i < slots ? [Buffer.from(piece), pathPart] : [Buffer.from(piece)]),
    ...(queryPart === null ? [] : [Buffer.from('?q='), queryPart])
  ])
  lines.push(Buffer.concat([Buffer.from(`${route.method} `), target, Buffer.from(' HTTP/1.1')]))
  lines.push(Buffer.from('Host: 127.0.0.1'), Buffer.from('Connection: close'))
  const authLine = authBytes !== null ? Buffer.concat([Buffer.from('Authorization: Bearer '), authBytes]) : auth.header === undefined ? null : Buffer.from(`Authorization: ${auth.header}`)
  if (authLine !== null) lines.push(authLine)
  if (headerBytes !== null) lines.push(Buffer.concat([Buffer.from(`${headerBytes[0]}: `), headerBytes[1]]))
  if (contentType !== null) lines.push(Buffer.concat([Buffer.from('Content-Type: '), contentType]))
  if (framing === 'huge-header') lines.push(Buffer.from(`X-Huge: ${'h'.repeat(20_000)}`))
  const payload = body ?? Buffer.alloc(0)
  let encoded = payload
  if (framing === 'chunked') {
    lines.push(Buffer.from('Transfer-Encoding: chunked'))
    encoded = Buffer.concat([...(payload.length > 0 ? [Buffer.from(`${payload.length.toString(16)}\r\n`), payload, Buffer.from('\r\n')] : []), Buffer.from('0\r\n\r\n')])
  } else if (framing === 'double-length') {
    lines.push(Buffer.from(`Content-Length: ${payload.length}`), Buffer.from(`Content-Length: ${payload.length + 1}`))
  } else if (framing === 'bad-length') {
    lines.push(Buffer.from('Content-Length: -1'))
  } else if (framing === 'length-and-chunked') {
    lines.push(Buffer.from(`Content-Length: ${payload.length}`), Buffer.from('Transfer-Encoding: chunked'))
  } else if (payload.length > 0 || route.method === 'POST') {
    lines.push(Buffer.from(`Content-Length: ${payload.length}`))
  }
  const bytes = Buffer.concat([...lines.flatMap((line) => [line, Buffer.from('\r\n')]), Buffer.from('\r\n'), encoded])
  const label = bytes.subarray(0, 300).toString('latin1')
  // A custom auth header of raw bytes is never a valid token.
  return { route, auth: authBytes === null ? auth : { kind: 'invalid', header: 'raw bytes' }, bytes, label }
})

/** Sends raw bytes on a fresh connection and reads the first response. */
async function sendRaw (bytes: Buffer): Promise<Answer> {
  const socket = connect(port, '127.0.0.1')
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  const ended = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => { socket.destroy(); reject(new Error('no answer within 10 s')) }, 10_000)
    socket.on('close', () => { clearTimeout(timer); resolve() })
    // The server may close while the client still writes (EPIPE, ECONNRESET): read what arrived.
    socket.on('error', () => {})
  })
  // Not end(): a half-closed client has its in-flight request aborted by Node. Every request says
  // Connection: close, so the server closes once it has answered.
  socket.write(bytes)
  await ended
  const raw = Buffer.concat(chunks)
  const split = raw.indexOf('\r\n\r\n')
  if (split < 0) throw new Error(`no HTTP response: ${JSON.stringify(raw.toString('latin1'))}`)
  const headLines = raw.subarray(0, split).toString('latin1').split('\r\n')
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(headLines[0] ?? '')?.[1])
  const headers = new Map(headLines.slice(1).map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]))
  let rest = raw.subarray(split + 4)
  if (headers.get('transfer-encoding') === 'chunked') {
    const parts: Buffer[] = []
    for (;;) {
      const eol = rest.indexOf('\r\n')
      const size = parseInt(rest.subarray(0, eol).toString('latin1'), 16)
      if (!(size > 0)) break
      parts.push(rest.subarray(eol + 2, eol + 2 + size))
      rest = rest.subarray(eol + 2 + size + 2)
    }
    rest = Buffer.concat(parts)
  } else if (headers.has('content-length')) {
    rest = rest.subarray(0, Number(headers.get('content-length')))
  }
  const link = headers.get('link')
  const location = headers.get('location')
  return {
    status,
    contentType: headers.get('content-type') ?? '',
    body: rest.toString('utf8'),
    ...(link === undefined ? {} : { link }),
    ...(location === undefined ? {} : { location })
  }
}

// ---- the runs -----------------------------------------------------------------------------------

const routes = registeredRoutes(app)
t.comment(`fast-check seed ${SEED} (replay with FAST_CHECK_SEED=${SEED}); ${routes.length} routes`)

// Every collection, sort and order, each with the scope of a cursor the service issued (collection,
// sort, order, filters), so that a forged key or id gets past the scope and reaches its own checks.
const CURSOR_COLLECTIONS: Array<{ path: string, sorts: string[] }> = [
  { path: '/v2/messages', sorts: ['id', 'createdAt', 'priority', 'subject'] },
  { path: '/v2/messages/search?q=seed', sorts: ['id', 'createdAt', 'priority', 'subject'] },
  { path: '/v2/users', sorts: ['id', 'name', 'email', 'role', 'createdAt'] },
  { path: '/v2/movies', sorts: ['id', 'title', 'year', 'rating', 'genre'] }
]
const admin = validAuth[2]!
const scopes: Array<{ route: Route, url: string, scope: unknown[] }> = []
for (const { path, sorts } of CURSOR_COLLECTIONS) {
  const route = routes.find((candidate) => candidate.method === 'GET' && candidate.path === path.split('?')[0])!
  for (const sort of sorts) {
    for (const order of ['asc', 'desc']) {
      const url = `${path}${path.includes('?') ? '&' : '?'}sort=${sort}&order=${order}`
      const res = await app.inject({ url: `${url}&limit=1`, headers: { authorization: admin.header } })
      const cursor = res.json<{ pagination: { nextCursor: string } }>().pagination.nextCursor
      scopes.push({ route, url, scope: (JSON.parse(Buffer.from(cursor, 'base64url').toString()) as unknown[]).slice(0, 4) })
    }
  }
}

t.test('the app runs in production mode and every route is found', async (t) => {
  t.same([config.production, config.development], [true, false], 'production configuration')
  const keys = routes.map(routeKey)
  for (const key of ['GET /health', 'GET /v2/messages', 'POST /v2/messages', 'GET /v2/messages/:id', 'DELETE /v2/messages/:id',
    'GET /v2/messages/search', 'GET /v2/users/me', 'GET /v2/users/:id', 'GET /v2/users', 'GET /v2/hello', 'GET /v2/movies',
    'POST /v2/input/users', 'GET /v2/input/users/:id', 'GET /v2/weather', 'GET /v2/weather/:city', 'GET /metrics', 'GET /api-docs/json']) {
    t.ok(keys.includes(key), `${key} is enumerated`)
  }
  t.same(routes.filter((route) => route.protected).map(routeKey).filter((key) => key.startsWith('GET ')).sort(), [
    'GET /v2/hello', 'GET /v2/hello/', 'GET /v2/users', 'GET /v2/users/', 'GET /v2/users/:id', 'GET /v2/users/me',
    'GET /v2/weather', 'GET /v2/weather/', 'GET /v2/weather/:city'
  ], 'the protected GET routes, read from the OpenAPI document')
})

// Defects the fuzzing found, pinned with their exact answers.
t.test('regressions: U+0000 in text bound for the database is a 400, not a driver error', async (t) => {
  const nul = (field: string) => ({ error: 'Validation failed', details: [`${field} must not contain the NUL character`] })
  const get = async (url: string) => {
    const res = await app.inject({ url })
    return [res.statusCode, res.json()]
  }
  t.same(await get('/v2/messages?subject=a%00b'), [400, nul('subject')], 'messages filter subject')
  t.same(await get('/v2/messages/search?q=%00'), [400, nul('q')], 'search q')
  t.same(await get('/v2/messages/search?q=seed&subject=%00'), [400, nul('subject')], 'search filter subject')
  t.same(await get('/v2/movies?genre=Drama%00'), [400, nul('genre')], 'movies filter genre')
  const post = async (payload: string) => {
    const res = await app.inject({ method: 'POST', url: '/v2/messages', payload, headers: { authorization: validAuth[0]!.header, 'content-type': 'application/json' } })
    return [res.statusCode, res.json()]
  }
  t.same(await post('{"content":"a\\u0000b"}'), [400, nul('content')], 'message content')
  t.same(await post('{"content":" \\u0000 "}'), [400, nul('content')], 'message content, otherwise blank')
  t.same(await post('{"content":"ok","subject":"\\u0000"}'), [400, nul('subject')], 'message subject')
  t.same(await post('{"content":" \\t "}'), [400, { error: 'Validation failed', details: ['content is required and must be a string'] }],
    'whitespace-only content is still reported as missing')
  t.equal(await countRows('messages'), before.messages, 'nothing was stored')
})

t.test('regressions: a path parameter that is not valid percent-encoded UTF-8 is each route\'s own answer (CONTRACT 16)', async (t) => {
  const badId = { error: 'Parameter "id" must be a positive integer' }
  const send = async (method: 'GET' | 'DELETE', url: string, token = false) => {
    const res = await app.inject({ method, url, headers: token ? { authorization: validAuth[2]!.header } : {} })
    return [res.statusCode, res.json()]
  }
  for (const segment of ['%ED%A0%80', '%zz', '%', '%FF', '1%C0%AF']) {
    t.same(await send('GET', `/v2/input/users/${segment}`), [400, badId], `GET /v2/input/users/${segment}`)
    t.same(await send('GET', `/v2/messages/${segment}`), [400, badId], `GET /v2/messages/${segment}`)
    t.same(await send('DELETE', `/v2/messages/${segment}`), [401, { error: 'Invalid or missing token' }], `DELETE /v2/messages/${segment} without a token`)
    t.same(await send('DELETE', `/v2/messages/${segment}`, true), [400, badId], `DELETE /v2/messages/${segment}`)
    t.same(await send('GET', `/v2/users/${segment}`), [401, { error: 'Invalid or missing token' }], `GET /v2/users/${segment} without a token: authentication first`)
    t.same(await send('GET', `/v2/users/${segment}`, true), [400, badId], `GET /v2/users/${segment}`)
  }
  t.same(await send('GET', '/v2/weather/%ED%A0%80', true), [200, { name: 'Fuzzville', main: { temp: 20 }, cod: 200 }], 'GET /v2/weather/%ED%A0%80: the city is U+FFFD three times')
  t.same(await send('GET', '/v2/weather/%zz'), [401, { error: 'Invalid or missing token' }], 'GET /v2/weather/%zz without a token')
})

t.test('regressions: what Node answers before Fastify has the same { error } shape', async (t) => {
  const raw = async (request: string) => {
    const answer = await sendRaw(Buffer.from(request, 'latin1'))
    return [answer.status, answer.contentType, JSON.parse(answer.body)]
  }
  const json = 'application/json; charset=utf-8'
  t.same(await raw('GET /health HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nConnection: close\r\n\r\n'),
    [417, json, { error: 'Expectation Failed' }], 'an Expect other than 100-continue')
  const redirect = await sendRaw(Buffer.from('GET /api-docs/static/index.html?a=<x>"y",z;rel=preload HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 'latin1'))
  t.same([redirect.status, redirect.location], [302, '/api-docs/static/index.html?a=%3Cx%3E%22y%22,z;rel=preload'],
    'the docs\' redirect builds its Location from the request target, which holds no raw <, > or " (CONTRACT 16)')
  t.same(await raw('GET /v2/messages?q=\xff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
    [400, json, { error: 'Bad Request' }], 'a byte above 0x7f in the request target')
  t.same(await raw('POST /v2/input/users HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}'),
    [400, json, { error: 'Bad Request' }], 'two Content-Length headers')
  t.same(await raw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Huge: ${'h'.repeat(20_000)}\r\n\r\n`),
    [431, json, { error: 'Request Header Fields Too Large' }], 'a header block over 16 KiB')
})

for (const [index, route] of routes.entries()) {
  const light = route.method === 'HEAD' || route.path.startsWith('/api-docs/static') || route.path === '/api-docs/*'
  const numRuns = light ? LIGHT_RUNS : RUNS
  t.test(`${routeKey(route)}: ${numRuns} hostile requests`, async (t) => {
    await fc.assert(fc.asyncProperty(httpRequest(route), async (request) => {
      const counted = await rowCounts()
      const answer = await inject(request)
      check(request, answer)
      checkOwnRule(request, answer)
      checkWrites(request, answer, counted, await rowCounts())
    }), { seed: SEED + index, numRuns, includeErrorInReport: true })
    t.pass('no 5xx, every error body is a bare public { error }, and each answer wrote exactly what it says')
  })
}

// ---- forged cursors and sync tokens (CONTRACT 16) ---------------------------------------------------

// Keys and ids as JSON text, so numbers JSON can write and no JavaScript number holds are sent too.
const forgedKey = fc.oneof(
  { weight: 3, arbitrary: unstorable.map((value) => JSON.stringify(value)) },
  { weight: 2, arbitrary: fc.constantFrom('"a\\u0000b"', '"\\u0000"', '"\\ud800"', '"x\\udfff"', '"\\ude00\\ud83d"') },
  { weight: 2, arbitrary: fc.oneof(edgeNumber, fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String)).map((value) => JSON.stringify(value)) },
  { weight: 1, arbitrary: edgeNumber },
  {
    weight: 2,
    arbitrary: fc.constantFrom('null', 'true', '{}', '[]', '"-210866803200000001"', '"-210866803200000000"', '"9223372036854774784"', '"9223372036854775807"',
      '"2147483648"', '"NaN"', '"Infinity"', '"1e400"', '"urgent"', '"Admin"', '"Drama"', '""')
  },
  { weight: 1, arbitrary: text.map((value) => JSON.stringify(value)) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }).map((value) => JSON.stringify(value)) }
)
const forgedId = fc.oneof(
  fc.integer().map(String), fc.maxSafeInteger().map(String), edgeNumber,
  fc.constantFrom('null', '"1"', '1.5', '-0', '[]', String(seeded[0] ?? 1))
)

t.test(`forged cursors: ${RUNS} per collection, over every sort, order and direction`, async (t) => {
  for (const [index, path] of CURSOR_COLLECTIONS.map((collection) => collection.path).entries()) {
    const mine = scopes.filter((scope) => scope.url.startsWith(path + (path.includes('?') ? '&' : '?')))
    await fc.assert(fc.asyncProperty(fc.constantFrom(...mine), fc.constantFrom('after', 'before'), forgedKey, forgedId, fc.boolean(), async ({ route, url, scope }, direction, key, id, extra) => {
      const fields = [...scope.map((field) => JSON.stringify(field)), key, id, ...(extra ? ['0'] : [])]
      const request: HttpRequest = { route, method: 'GET', url: `${url}&${direction}=${Buffer.from(`[${fields.join(',')}]`).toString('base64url')}`, auth: admin, headers: { authorization: admin.header }, body: undefined }
      const counted = await rowCounts()
      const answer = await inject(request)
      check(request, answer)
      checkWrites(request, answer, counted, await rowCounts())
      if (answer.status !== 200 && !(answer.status === 400 && answer.body === '{"error":"Invalid cursor"}')) {
        throw new Error(`a forged cursor [${fields.join(',')}] on ${url} ${direction}: ${answer.status} ${answer.body}`)
      }
    }), { seed: SEED + 1000 + index, numRuns: RUNS, includeErrorInReport: true })
  }
  t.pass('each is 200 or 400 Invalid cursor')
})

t.test(`forged sync tokens: ${RUNS} on GET /v2/messages/changes`, async (t) => {
  const route = routes.find((candidate) => candidate.method === 'GET' && candidate.path === '/v2/messages/changes')!
  // Decimal fields at the edges of a safe integer, int8, xid8 and pg_lsn (64 bits), and a timeline (32 bits).
  const digits = fc.oneof(
    fc.constantFrom('0', '1', '00000000000000000001', '4294967295', '4294967296', '9007199254740991', '9007199254740992', '9223372036854775807',
      '9223372036854775808', '18446744073709551615', '18446744073709551616', '99999999999999999999', String(Date.now())),
    fc.bigInt({ min: 0n, max: 2n ** 70n }).map(String)
  )
  const token = fc.oneof(
    { weight: 4, arbitrary: fc.tuple(fc.constantFrom('1', '2', '3'), fc.constantFrom('s', 'c', 'x'), fc.array(digits, { minLength: 3, maxLength: 7 })).map(([version, kind, fields]) => [version, kind, ...fields].join('.')) },
    { weight: 1, arbitrary: unstorable },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 60 }) }
  ).map((raw) => Buffer.from(raw).toString('base64url'))
  await fc.assert(fc.asyncProperty(token, fc.option(fc.constantFrom('0', '1', '1000', '-1', '1e400'), { nil: undefined }), async (since, limit) => {
    const request: HttpRequest = { route, method: 'GET', url: `/v2/messages/changes?since=${since}${limit === undefined ? '' : `&limit=${limit}`}`, auth: { kind: 'invalid', header: undefined }, headers: {}, body: undefined }
    const answer = await inject(request)
    check(request, answer)
    if (answer.status !== 200 && answer.body !== '{"error":"Invalid sync token"}' && answer.body !== '{"error":"Sync token expired"}') {
      throw new Error(`a forged sync token ${since}: ${answer.status} ${answer.body}`)
    }
  }), { seed: SEED + 2000, numRuns: RUNS, includeErrorInReport: true })
  t.pass('each is 200, 400 Invalid sync token or 410 Sync token expired')
})

const rawStatuses = new Map<number, number>()
t.test(`raw bytes over a socket: ${RAW_RUNS} requests with non-UTF-8 URLs, headers and bodies`, async (t) => {
  // Every route but the static docs assets, whose handling of odd bytes is @fastify/static's.
  const targets = routes.filter((route) => !route.path.startsWith('/api-docs/'))
  await fc.assert(fc.asyncProperty(rawRequest(targets), async (raw) => {
    const answer = await sendRaw(raw.bytes)
    rawStatuses.set(answer.status, (rawStatuses.get(answer.status) ?? 0) + 1)
    if (!(answer.status >= 100)) throw new Error(`no status line for ${JSON.stringify(raw.label)}`)
    check({ route: raw.route, method: raw.route.method, url: raw.label, auth: raw.auth, headers: {}, body: undefined }, answer)
  }), { seed: SEED, numRuns: RAW_RUNS, includeErrorInReport: true })
  t.pass('no 5xx, and every error body is a bare public { error }')
  t.comment(`statuses: ${[...rawStatuses].sort(([a], [b]) => a - b).map(([s, n]) => `${s}×${n}`).join(' ')}`)
})

t.test('non-UTF-8 JSON bodies over a socket reach the handlers and are decoded with U+FFFD', async (t) => {
  const posts = routes.filter((route) => route.method === 'POST')
  let stored = 0
  await fc.assert(fc.asyncProperty(
    fc.constantFrom(...posts), fc.constantFrom(...validAuth), fc.oneof(highBytes, invalidUtf8, targetBytes), fc.boolean(),
    async (route, caller, bytes, chunked) => {
      const body = Buffer.concat([Buffer.from('{"content":"x'), bytes, Buffer.from('","name":"x'), bytes, Buffer.from('","email":"x@y.z"}')])
      const framing = chunked
        ? [Buffer.from(`Transfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]
        : [Buffer.from(`Content-Length: ${body.length}\r\n\r\n`), body]
      const head = `POST ${route.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: ${caller.header}\r\nContent-Type: application/json\r\n`
      const answer = await sendRaw(Buffer.concat([Buffer.from(head), ...framing]))
      check({ route, method: 'POST', url: route.path, auth: caller, headers: {}, body: undefined }, answer)
      // What a UTF-8 decoder that replaces invalid sequences makes of the bytes.
      let expected: { content: string, name: string } | undefined
      try {
        expected = JSON.parse(body.toString('utf8'))
      } catch {}
      if (expected === undefined) {
        if (answer.status !== 400 || JSON.parse(answer.body).error !== 'Malformed JSON body') throw new Error(`not 400 Malformed JSON body: ${answer.status} ${answer.body}`)
        return
      }
      if (answer.status !== 201) throw new Error(`a decodable body was refused: ${answer.status} ${answer.body}`)
      const echoed = JSON.parse(answer.body) as { content?: string, name?: string }
      const field = route.path.startsWith('/v2/messages') ? 'content' : 'name'
      if (echoed[field] !== expected[field]) throw new Error(`${field} ${JSON.stringify(echoed[field])} is not ${JSON.stringify(expected[field])}`)
      if (field === 'content') stored++
    }), { seed: SEED, numRuns: UTF8_RUNS, includeErrorInReport: true })
  t.ok(stored > 0, `${stored} messages with non-UTF-8 bytes were stored and returned decoded`)
})

t.test('the authenticated routes were reached both with and without a valid token', async (t) => {
  for (const route of routes.filter((route) => route.protected && route.method !== 'HEAD')) {
    t.ok(tally.validPastAuth.has(routeKey(route)), `${routeKey(route)}: a valid token got past authentication`)
    t.ok(tally.refused.has(routeKey(route)), `${routeKey(route)}: no valid token got 401`)
  }
  const summary = [...tally.byRoute].map(([key, statuses]) => `${key}: ${[...statuses].sort(([a], [b]) => a - b).map(([s, n]) => `${s}×${n}`).join(' ')}`)
  t.comment(summary.join('\n'))
})

t.test('the database holds exactly what the 2xx answers say', async (t) => {
  t.equal(await countRows('messages'), before.messages + tally.created - tally.deleted,
    `messages: ${before.messages} + ${tally.created} created (201) - ${tally.deleted} deleted (204); no 4xx wrote or deleted anything`)
  t.equal(await countRows('movies'), before.movies, 'movies unchanged')
  const subjects = await queryRows<{ subject: string }>(app.db, sql`select subject_id as subject from users order by subject_id`)
  t.same(subjects.map((row) => row.subject), ['fuzz-admin', 'fuzz-moderator', 'fuzz-user'], 'local users only for the valid callers')
  t.equal(before.users, 3)
})
