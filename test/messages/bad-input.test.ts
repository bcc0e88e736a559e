// CONTRACT 16 "Bad input is a 4xx, never a 500, and changes nothing" for POST /v2/messages: text that
// PostgreSQL cannot store as sent, bodies nested as deep as the body limit allows, with and without an
// Idempotency-Key; and the writer, which tells the rows it wrote apart by their place in the group,
// never by their content.
import { sql } from 'drizzle-orm'
import t from 'tap'
import type { App } from '../../src/app.js'
import { BODY_LIMIT } from '../../src/app.js'
import { build } from '../helpers/build.js'
import { createAuthor, queryRows } from '../helpers/fixtures.js'

const alice = { sub: 'alice', role: 'User', name: 'Alice' }
const invalid = (...details: string[]) => ({ status: 400, body: { error: 'Validation failed', details } })

interface Reply { status: number, body: unknown }

async function post (app: App, payload: string, key?: string): Promise<Reply> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-test-user': JSON.stringify(alice) }
  if (key !== undefined) headers['idempotency-key'] = key
  const res = await app.inject({ method: 'POST', url: '/v2/messages', headers, payload })
  return { status: res.statusCode, body: res.json() }
}

async function rows (app: App): Promise<{ messages: number, keys: number, users: number }> {
  const [row] = await queryRows<{ messages: number, keys: number, users: number }>(app.db, sql`select
    (select count(*)::int from messages) as messages, (select count(*)::int from idempotency_keys) as keys, (select count(*)::int from users) as users`)
  return row!
}

t.test('a lone surrogate is 400 "must be valid Unicode text" and writes nothing, with and without Idempotency-Key', async (t) => {
  const app = await build(t, { testAuth: true })
  const cases: Array<[string, string, ReturnType<typeof invalid>]> = [
    ['a leading half at the end of content', '{"content":"y\\ud800"}', invalid('content must be valid Unicode text')],
    ['a trailing half alone', '{"content":"\\udfff"}', invalid('content must be valid Unicode text')],
    ['a pair cut in two, amid text', '{"content":"a\\ude00\\ud83d b"}', invalid('content must be valid Unicode text')],
    ['a lone surrogate in blank content', '{"content":" \\ud800 "}', invalid('content must be valid Unicode text')],
    ['in subject', '{"content":"fine","subject":"s\\udbff"}', invalid('subject must be valid Unicode text')],
    ['in both', '{"content":"\\ud800","subject":"\\udc00"}', invalid('content must be valid Unicode text', 'subject must be valid Unicode text')],
    ['NUL keeps its own detail', '{"content":"a\\u0000\\ud800"}', invalid('content must not contain the NUL character')]
  ]
  for (const withKey of [false, true]) {
    // A caller without a local user, then one with a row: the case that used to write twice.
    for (const round of ['before the author has a row', 'once the author has a row']) {
      for (const [name, payload, expected] of cases) {
        const before = await rows(app)
        t.same(await post(app, payload, withKey ? `k-${name}-${round}` : undefined), expected, `${name}, ${round}${withKey ? ', with a key' : ''}`)
        t.same(await rows(app), before, 'no message, key or user was written')
      }
      if (round === 'before the author has a row') t.equal((await post(app, '{"content":"first"}')).status, 201, 'the author gets a row')
    }
  }
  const pair = await post(app, '{"content":"rain \\ud83c\\udf27 and snow ❄","subject":"\\ud83d\\ude00"}', 'pair')
  t.match(pair, { status: 201, body: { content: 'rain 🌧 and snow ❄', subject: '😀' } }, 'a surrogate pair is one character: stored as sent')
})

t.test('a body nested thousands of levels deep in an unknown member is 201 or 400, never 500', async (t) => {
  const app = await build(t, { testAuth: true })
  // As deep as the body limit allows: arrays, objects, and both mixed, around a value at the bottom.
  const levels = Math.floor((BODY_LIMIT - 200) / 2)
  const shapes: Array<[string, (bottom: string) => string]> = [
    ['arrays', (bottom) => '['.repeat(levels) + bottom + ']'.repeat(levels)],
    ['objects', (bottom) => '{"a":'.repeat(Math.floor(levels / 3)) + bottom + '}'.repeat(Math.floor(levels / 3))],
    ['arrays and objects', (bottom) => '[{"b":'.repeat(Math.floor(levels / 4)) + bottom + '}]'.repeat(Math.floor(levels / 4))]
  ]
  for (const [name, nest] of shapes) {
    const payload = `{"content":"deep ${name}","extra":${nest('1')}}`
    const key = `deep-${name.replaceAll(' ', '-')}`
    t.ok(Buffer.byteLength(payload) <= BODY_LIMIT - 100, `${name}: within the body limit`)
    const plain = await post(app, payload)
    t.match(plain, { status: 201, body: { content: `deep ${name}` } }, `${name}, without a key: 201`)
    const keyed = await post(app, payload, key)
    t.match(keyed, { status: 201, body: { content: `deep ${name}` } }, `${name}, with a key: 201`)
    t.same(await post(app, payload, key), keyed, `${name}, the same body again: the stored 201`)
    // The same JSON value written otherwise is the same request (CONTRACT 12); one that differs only
    // at the bottom is another.
    t.same(await post(app, payload.replace('{"content":', '{ "content" : '), key), keyed, `${name}, other whitespace: the stored 201`)
    t.same(await post(app, `{"content":"deep ${name}","extra":${nest('2')}}`, key),
      { status: 422, body: { error: 'Idempotency-Key was used with a different request' } }, `${name}, another value at the bottom: 422`)
  }
  const arrays = '['.repeat(levels) + ']'.repeat(levels)
  const inContent = `{"content":${arrays}}`
  t.same(await post(app, inContent), invalid('content is required and must be a string'), 'deep in a known member: 400')
  t.same(await post(app, inContent, 'deep-known'), invalid('content is required and must be a string'), 'and with a key')
  t.same(await rows(app), { messages: 6, keys: 3, users: 1 }, 'one message per 201 that was not a replay, one key per keyed one')
})

t.test('the writer tells its rows apart by their place in the group, never by their content', async (t) => {
  const app = await build(t, { testAuth: true })
  for (const sub of ['ann', 'ben', 'cid']) await createAuthor(app, sub, { name: sub.toUpperCase() })
  // Past the schema, as a create whose text the database stores otherwise (a lone surrogate becomes
  // U+FFFD): each caller still gets its own row, and a caller without a local user gets none at
  // first, so it is provisioned (here from its claims) and written again.
  const creates = ['ann', 'ben', 'nobody', 'cid', 'ann', 'ghost', 'ben', 'ann'].map((sub, i) =>
    ({ sub, input: { content: i % 2 === 0 ? 'same \ud800' : 'same', subject: i % 3 === 0 ? '\udfff' : null } }))
  const named = (sub: string) => sub === 'nobody' || sub === 'ghost' ? null : sub.toUpperCase()
  const results = await Promise.all(creates.map(async ({ sub, input }) => (await app.messagesRepository.create({ sub, role: 'User' }, input)).body))
  results.forEach((message, i) => {
    const { sub, input } = creates[i]!
    t.match(message, { content: input.content.toWellFormed(), subject: input.subject?.toWellFormed() ?? null, author: { name: named(sub) } }, `create ${i} by ${sub}: its own row`)
  })
  const ids = results.flatMap((message) => typeof message === 'object' ? [message.id] : [])
  t.equal(new Set(ids).size, ids.length, 'no row was handed to two callers')
  const stored = await queryRows<{ id: number, content: string }>(app.db, sql`select id::float8 as id, content from messages order by id`)
  t.same(stored.map((row) => row.id), [...ids].sort((a, b) => a - b), 'exactly one row per create with an author')
})
