import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import Fastify from 'fastify'
import t from 'tap'
import { chooseEncoding, compress, createRepresentation, type Compress } from '../../src/http-cache/representation.js'
import representationPlugin from '../../plugins/representation.js'
import { build } from '../helpers/build.js'
import { createAuthor, createMessages } from '../helpers/fixtures.js'

// CONTRACT 12, compression: br and gzip negotiated with q-values, bodies of 1 KiB or more compressed,
// Vary: Accept-Encoding on every response that could be, and a page served again from memory
// compressed once per encoding.

const decode = (encoding: string | undefined, body: Buffer): Buffer =>
  encoding === 'br' ? brotliDecompressSync(body) : encoding === 'gzip' ? gunzipSync(body) : body

t.test('negotiation honours q-values and prefers br when the client weighs both alike', async (t) => {
  const cases: Array<[string | undefined, string]> = [
    [undefined, 'identity'],
    ['', 'identity'],
    ['gzip, br', 'br'],
    ['br, gzip', 'br'],
    ['gzip', 'gzip'],
    ['x-gzip', 'gzip'],
    ['GZIP', 'gzip'],
    ['gzip;q=1, br;q=0.5', 'gzip'],
    ['br;q=0.2, gzip;q=0.8, identity;q=0.1', 'gzip'],
    ['br;q=0, gzip;q=0', 'identity'],
    ['deflate', 'identity'],
    ['*', 'br'],
    ['identity', 'identity']
  ]
  for (const [header, expected] of cases) t.equal(chooseEncoding(header), expected, `Accept-Encoding: ${String(header)}`)
})

t.test('a page of 1 KiB or more is compressed as negotiated, and decodes to the identical JSON', async (t) => {
  const app = await build(t, { testAuth: true })
  const author = await createAuthor(app, 'alice')
  await createMessages(app, author.id, 30, (i) => ({ content: `A message long enough to make the page large, number ${i}.` }))
  const plain = await app.inject({ url: '/v2/messages' })
  t.equal(plain.statusCode, 200)
  t.ok(plain.rawPayload.length >= 1024, 'the page is over the threshold')
  t.notOk(plain.headers['content-encoding'], 'identity without Accept-Encoding')
  t.equal(plain.headers.vary, 'accept-encoding')

  for (const [header, expected] of [['gzip, br', 'br'], ['gzip', 'gzip'], ['br;q=0.5, gzip', 'gzip'], ['br;q=0, gzip;q=0', undefined]] as const) {
    const res = await app.inject({ url: '/v2/messages', headers: { 'accept-encoding': header } })
    t.equal(res.statusCode, 200)
    t.equal(res.headers['content-encoding'], expected, `Accept-Encoding: ${header}`)
    t.equal(res.headers.vary, 'accept-encoding')
    t.equal(res.headers.etag, plain.headers.etag, 'one tag for every encoding of one body')
    t.equal(Number(res.headers['content-length']), res.rawPayload.length, 'Content-Length counts the bytes sent')
    t.same(decode(expected, res.rawPayload), plain.rawPayload, 'decodes to the same bytes')
    if (expected !== undefined) t.ok(res.rawPayload.length < plain.rawPayload.length / 2, `${expected} at least halves the page`)
  }
})

t.test('bodies under 1 KiB are sent as they are, still with Vary', async (t) => {
  const app = await build(t, { testAuth: true })
  const author = await createAuthor(app, 'alice')
  await createMessages(app, author.id, 1)
  for (const url of ['/v2/messages?limit=1', '/v2/messages/1', '/health', '/v2/messages/999']) {
    const res = await app.inject({ url, headers: { 'accept-encoding': 'br, gzip' } })
    t.ok(res.rawPayload.length < 1024, url)
    t.notOk(res.headers['content-encoding'], `${url}: not compressed`)
    t.equal(res.headers.vary, 'accept-encoding', `${url}: Vary`)
  }
})

t.test('every other response of 1 KiB or more is compressed too: the OpenAPI document, Swagger UI', async (t) => {
  const app = await build(t)
  for (const url of ['/api-docs/json', '/api-docs/static/swagger-ui-bundle.js']) {
    const plain = await app.inject({ url })
    const gzip = await app.inject({ url, headers: { 'accept-encoding': 'gzip' } })
    const br = await app.inject({ url, headers: { 'accept-encoding': 'br;q=1, gzip;q=0.9' } })
    t.equal(plain.statusCode, 200, url)
    t.notOk(plain.headers['content-encoding'])
    t.equal(gzip.headers['content-encoding'], 'gzip', `${url}: gzip`)
    t.equal(br.headers['content-encoding'], 'br', `${url}: br`)
    t.match(gzip.headers.vary, /accept-encoding/)
    t.same(gunzipSync(gzip.rawPayload), plain.rawPayload)
    t.same(brotliDecompressSync(br.rawPayload), plain.rawPayload)
  }
})

t.test('a payload served again is serialized once and compressed once per encoding', async (t) => {
  const calls: string[] = []
  const counting: Compress = (body, encoding) => {
    calls.push(encoding)
    return compress(body, encoding)
  }
  const app = Fastify()
  t.teardown(() => app.close())
  const representation = createRepresentation({ cacheControl: 'no-cache', compress: counting })
  const makePage = () => ({ data: Array.from({ length: 40 }, (_, i) => ({ id: i, text: `item ${i} `.repeat(5) })) })
  let page = makePage()
  let served = 0
  app.get('/page', async (request, reply) => {
    served++
    return representation.send(request, reply, { tag: 'W/"1"', notModified: false, value: page })
  })
  const bodies = new Map<string, Buffer>()
  for (let round = 0; round < 3; round++) {
    for (const encoding of ['br', 'gzip', 'identity']) {
      const res = await app.inject({ url: '/page', headers: { 'accept-encoding': encoding } })
      t.equal(res.statusCode, 200)
      const known = bodies.get(encoding)
      if (known === undefined) bodies.set(encoding, res.rawPayload)
      else t.same(res.rawPayload, known, `${encoding}: the same bytes again`)
    }
  }
  t.equal(served, 9)
  t.same(calls, ['br', 'gzip'], 'each encoding compressed once for nine answers')
  t.same(JSON.parse(gunzipSync(bodies.get('gzip')!).toString()), page)

  // A new payload object (a page computed again after a write) is compressed again.
  page = makePage()
  const other = await app.inject({ url: '/page', headers: { 'accept-encoding': 'gzip' } })
  t.equal(other.statusCode, 200)
  t.same(calls, ['br', 'gzip', 'gzip'], 'a new page, compressed once more')
})

t.test('reply.represent: each route serializes a payload once, with its own schema, and compresses it once per encoding', async (t) => {
  const calls: string[] = []
  const counting: Compress = (body, encoding) => {
    calls.push(encoding)
    return compress(body, encoding)
  }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(representationPlugin, { compress: counting })
  const page = { data: Array.from({ length: 40 }, (_, i) => ({ id: i, text: `item ${i} `.repeat(5), hidden: 'not in the schema' })) }
  const item = { type: 'object', properties: { id: { type: 'number' }, text: { type: 'string' } } }
  const full = { type: 'object', properties: { data: { type: 'array', items: { type: 'object', properties: { ...item.properties, hidden: { type: 'string' } } } } } }
  const short = { type: 'object', properties: { data: { type: 'array', items: item } } }
  app.get('/full', { config: { representation: { cacheControl: 'no-cache' } }, schema: { response: { 200: full } } }, async (_request, reply) =>
    await reply.represent({ tag: 'W/"1"', notModified: false, value: page }))
  app.get('/short', { config: { representation: { cacheControl: 'private, no-cache' } }, schema: { response: { 200: short } } }, async (_request, reply) =>
    await reply.represent({ tag: 'W/"1"', notModified: false, value: page }))
  app.get('/bare', async (_request, reply) => await reply.represent({ tag: 'W/"1"', notModified: true }))
  const bodies: Record<string, string> = {}
  for (let round = 0; round < 2; round++) {
    for (const url of ['/full', '/short']) {
      const res = await app.inject({ url, headers: { 'accept-encoding': 'gzip' } })
      t.same([res.statusCode, res.headers.etag, res.headers['content-encoding']], [200, 'W/"1"', 'gzip'])
      bodies[url] = gunzipSync(res.rawPayload).toString()
    }
  }
  t.ok(bodies['/full']!.includes('hidden') && !bodies['/short']!.includes('hidden'), 'each route\'s own response schema')
  t.same(calls, ['gzip', 'gzip'], 'one compression per route and encoding for four answers')
  const notModified = await app.inject({ url: '/full', headers: { 'if-none-match': 'W/"1"' } })
  t.equal(notModified.statusCode, 200, 'the tag of a read is the repository\'s to decide, not the decorator\'s')
  t.equal((await app.inject({ url: '/bare' })).statusCode, 500, 'a route that declares no representation cannot send one')
})

t.test('large bodies compress off the event loop with the same result', async (t) => {
  const body = Buffer.from(JSON.stringify({ data: Array.from({ length: 2000 }, (_, i) => ({ id: i, text: `row ${i} of a large page` })) }))
  t.ok(body.length > 32 * 1024)
  for (const encoding of ['br', 'gzip'] as const) {
    const result = compress(body, encoding)
    t.ok(result instanceof Promise, `${encoding}: asynchronous above 32 KiB`)
    t.same(decode(encoding, await result), body)
  }
  t.notOk(compress(Buffer.from('{"small":true}'), 'gzip') instanceof Promise, 'small bodies compress at once')
})
