import { randomUUID } from 'node:crypto'
import { gunzipSync, brotliDecompressSync } from 'node:zlib'
import t from 'tap'
import { request } from 'undici'
import { build } from '../helpers/build.js'
import { createAuthor, createMessages } from '../helpers/fixtures.js'

// A mobile app's session over real HTTP on loopback (CONTRACT 12): revalidate with the stored ETag,
// take compressed pages, scroll by cursor following Link, and retry a POST with the same key. undici's
// request() decodes nothing, so the bytes checked are the bytes on the wire.

const alice = JSON.stringify({ sub: 'alice', role: 'User', email: 'alice@example.com' })

t.test('an app session over HTTP: ETag, compression, cursors and links, an idempotent retry, CORS', async (t) => {
  const app = await build(t, { testAuth: true, config: { corsOrigins: ['https://app.example.com'] } })
  const author = await createAuthor(app, 'alice')
  await createMessages(app, author.id, 60, (i) => ({ content: `Feed item ${i}: long enough that a page of them is over a kilobyte.` }))
  const base = await app.listen({ host: '127.0.0.1', port: 0 })
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await request(base + path, { headers })
    return { status: res.statusCode, headers: res.headers, body: Buffer.from(await res.body.arrayBuffer()) }
  }

  // First load, compressed; then a refresh that costs no body at all.
  const first = await get('/v2/messages?limit=20&sort=createdAt&order=desc', { 'accept-encoding': 'br, gzip', origin: 'https://app.example.com' })
  t.equal(first.status, 200)
  t.equal(first.headers['content-encoding'], 'br')
  t.equal(first.headers['access-control-allow-origin'], 'https://app.example.com')
  t.match(first.headers['access-control-expose-headers'], /ETag/i)
  t.match(first.headers['access-control-expose-headers'], /Link/i)
  const page = JSON.parse(brotliDecompressSync(first.body).toString())
  t.same(page.data.map((m: { content: string }) => m.content.split(':')[0]), Array.from({ length: 20 }, (_, i) => `Feed item ${59 - i}`))
  const refresh = await get('/v2/messages?limit=20&sort=createdAt&order=desc', { 'if-none-match': first.headers.etag as string, 'accept-encoding': 'br, gzip' })
  t.equal(refresh.status, 304)
  t.equal(refresh.body.length, 0, 'nothing but headers on the wire')

  // New messages arrive at the top while the app scrolls down: by the first page's nextCursor, then
  // by each cursor page's rel="next" (page-number links would shift under the new arrivals).
  t.match(first.headers.link, '</v2/messages?limit=20&sort=createdAt&order=desc&page=2>; rel="next"')
  let link = `</v2/messages?limit=20&sort=createdAt&order=desc&after=${page.pagination.nextCursor as string}>; rel="next"`
  const seen = page.data.map((m: { id: number }) => m.id) as number[]
  for (let step = 0; step < 5; step++) {
    await app.inject({ method: 'POST', url: '/v2/messages', headers: { 'x-test-user': alice }, payload: { content: `arrived during scroll ${step}` } })
    const next = /<([^>]+)>; rel="next"/.exec(link)
    if (next === null) break
    t.match(next[1], /after=/, 'the next link is a cursor link')
    const more = await get(next[1]!, { 'accept-encoding': 'gzip' })
    t.equal(more.status, 200)
    const body = JSON.parse((more.headers['content-encoding'] === 'gzip' ? gunzipSync(more.body) : more.body).toString())
    t.equal(body.pagination.page, null, 'cursor mode')
    seen.push(...body.data.map((m: { id: number }) => m.id))
    link = String(more.headers.link)
  }
  t.same(seen, Array.from({ length: 60 }, (_, i) => 60 - i), 'every original item once, in order, none of the new ones')
  t.notMatch(link, /rel="next"/, 'no next link at the end')

  // A create whose answer is lost is sent again with the same key: one message, the same bytes.
  const key = randomUUID()
  const post = async () => {
    const res = await request(`${base}/v2/messages`, {
      method: 'POST',
      headers: { 'x-test-user': alice, 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ content: 'sent twice', priority: 'high' })
    })
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() }
  }
  const created = await post()
  const retried = await post()
  t.equal(created.status, 201)
  t.equal(retried.status, 201)
  t.equal(retried.body, created.body, 'byte for byte')
  t.equal(retried.headers.location, created.headers.location)
  t.equal(retried.headers['idempotent-replayed'], 'true')
  t.notOk(created.headers['idempotent-replayed'])
  const total = JSON.parse((await get('/v2/messages/search?q=sent%20twice')).body.toString()).pagination.total
  t.equal(total, 1, 'one message for two requests')
})
