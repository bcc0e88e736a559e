// CONTRACT 12, idempotent creation: POST /v2/messages with an Idempotency-Key. Replays are byte for
// byte, keys are per caller, a different body is refused, a concurrent duplicate is never a second
// message (on this instance or another sharing the database), failures are not stored, keys expire,
// and a stored 201 survives a crash together with its message.
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'drizzle-orm'
import t from 'tap'
import { Agent, request } from 'undici'
import type { App } from '../../src/app.js'
import { canonicalJson, parseIdempotencyKey, requestFingerprint } from '../../src/idempotency/key.js'
import { createIdempotencyRepository } from '../../src/idempotency/repository.js'
import { createMessagesRepository } from '../../src/messages/repository.js'
import { primaryOnly } from '../../src/db/read-router.js'
import { build } from '../helpers/build.js'
import { createAuthor, queryRows } from '../helpers/fixtures.js'
import { startTestIdp } from '../helpers/idp.js'
import { processDatabase, startServer, type ServerProcess } from '../helpers/server-process.js'

const INVALID_KEY = { error: 'Invalid Idempotency-Key header' }
const REUSED = { error: 'Idempotency-Key was used with a different request' }
const IN_PROGRESS = { error: 'A request with this Idempotency-Key is in progress' }

interface Caller { sub: string, role?: string, email?: string, name?: string }

interface Answer {
  status: number
  /** The body exactly as sent. */
  raw: string
  location: string | undefined
  replayed: string | undefined
  retryAfter: string | undefined
  contentType: string | undefined
}

const alice: Caller = { sub: 'alice', role: 'User', email: 'alice@example.com', name: 'Alice' }
const bob: Caller = { sub: 'bob', role: 'User', email: 'bob@example.com', name: 'Bob' }

/** POSTs a raw JSON text (so key order and whitespace are the test's to choose) or a value. */
async function post (app: App, body: string | object, options: { caller?: Caller, key?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (options.caller !== undefined) headers['x-test-user'] = JSON.stringify(options.caller)
  if (options.key !== undefined) headers['idempotency-key'] = options.key
  const res = await app.inject({ method: 'POST', url: '/v2/messages', headers, payload: typeof body === 'string' ? body : JSON.stringify(body) })
  const header = (name: string) => res.headers[name] === undefined ? undefined : String(res.headers[name])
  return {
    status: res.statusCode,
    raw: res.payload,
    location: header('location'),
    replayed: header('idempotent-replayed'),
    retryAfter: header('retry-after'),
    contentType: header('content-type')
  }
}

async function count (app: App, where = sql`true`): Promise<number> {
  const [row] = await queryRows<{ n: number }>(app.db, sql`select count(*)::float8 as n from messages where ${where}`)
  return row?.n ?? -1
}

type KeyRow = { subject_id: string, key: string, message_id: number, body: string }
const byKey = (a: KeyRow, b: KeyRow) => JSON.stringify([a.subject_id, a.key]) < JSON.stringify([b.subject_id, b.key]) ? -1 : 1

async function keyRows (app: App): Promise<KeyRow[]> {
  return (await queryRows<KeyRow>(app.db, sql`select subject_id, key, message_id::float8 as message_id, body from idempotency_keys`)).sort(byKey)
}

t.test('parseIdempotencyKey and the request fingerprint', async (t) => {
  t.equal(parseIdempotencyKey(undefined), undefined, 'no header: no key')
  t.equal(parseIdempotencyKey('abc-123'), 'abc-123', 'a plain key')
  t.equal(parseIdempotencyKey('"abc-123"'), 'abc-123', 'the quoted form is the key inside the quotes')
  t.equal(parseIdempotencyKey('!~'), '!~', 'the ends of the visible range')
  t.equal(parseIdempotencyKey('a"b'), 'a"b', 'a quote inside a plain key is a visible character')
  t.equal(parseIdempotencyKey('x'.repeat(255)), 'x'.repeat(255), '255 characters')
  t.equal(parseIdempotencyKey(`"${'x'.repeat(255)}"`), 'x'.repeat(255), '255 characters, quoted')
  for (const bad of ['', 'x'.repeat(256), `"${'x'.repeat(256)}"`, 'clé', 'a b', 'a\tb', 'a\u0001b', 'a\u007fb', '"abc', 'abc"', '"', '""', '"a"b"']) {
    t.throws(() => parseIdempotencyKey(bad), { statusCode: 400, message: INVALID_KEY.error }, `${JSON.stringify(bad.length > 20 ? `${bad.slice(0, 8)}…(${bad.length})` : bad)} is refused`)
  }
  t.throws(() => parseIdempotencyKey(['a', 'b']), { statusCode: 400, message: INVALID_KEY.error }, 'a header given as a list is refused')

  t.equal(canonicalJson({ b: [1, { d: null, c: 'x' }], a: true }), '{"a":true,"b":[1,{"c":"x","d":null}]}', 'members sorted at every depth, arrays kept in order')
  t.equal(requestFingerprint(JSON.parse('{ "content" : "hi", "priority":"high" }')), requestFingerprint({ priority: 'high', content: 'hi' }),
    'the same JSON value, whatever the order and whitespace')
  t.not(requestFingerprint({ content: 'hi' }), requestFingerprint({ content: 'hi', priority: 'normal' }), 'another JSON value, another fingerprint')
  t.not(requestFingerprint({ a: [1, 2] }), requestFingerprint({ a: [2, 1] }), 'array order counts')

  // CONTRACT 16: as deep as a body within the 100 KiB limit can nest, which no recursion survives.
  const arrays = '['.repeat(51_000) + ']'.repeat(51_000)
  t.equal(canonicalJson(JSON.parse(arrays)), arrays, '51,000 nested arrays')
  const objects = (inner: string) => '{"z":0,"a":'.repeat(9_000) + inner + '}'.repeat(9_000)
  t.equal(canonicalJson(JSON.parse(objects('[{"y":"\\ud800","b":null}]'))), '{"a":'.repeat(9_000) + '[{"b":null,"y":"\\ud800"}]' + ',"z":0}'.repeat(9_000),
    '9,000 nested objects: members sorted at every depth, a lone surrogate escaped')
  t.equal(requestFingerprint(JSON.parse(objects('1'))), requestFingerprint(JSON.parse('{ "a" : '.repeat(9_000) + '1' + ', "z" : 0 }'.repeat(9_000))),
    'deep: the same fingerprint whatever the member order and whitespace')
})

t.test('an invalid Idempotency-Key is 400 and creates nothing', async (t) => {
  const app = await build(t, { testAuth: true })
  const cases: Array<[string, string]> = [
    ['empty', ''],
    ['256 characters', 'k'.repeat(256)],
    ['non-ASCII', 'schlüssel'],
    ['a control character', 'key\u0007one'],
    ['a space', 'two words'],
    ['an unbalanced quote', '"open'],
    ['a closing quote only', 'close"'],
    ['empty quotes', '""']
  ]
  for (const [name, key] of cases) {
    const answer = await post(app, { content: 'never stored' }, { caller: alice, key })
    t.same([answer.status, JSON.parse(answer.raw)], [400, INVALID_KEY], `${name}: 400 with the exact body`)
  }
  t.equal(await count(app), 0, 'no message was created')
  t.same(await keyRows(app), [], 'no key was stored')

  const answer = await post(app, { content: 'no key at all' }, { caller: alice })
  t.same([answer.status, answer.replayed], [201, undefined], 'without the header, POST is unchanged')
  const again = await post(app, { content: 'no key at all' }, { caller: alice })
  t.not(JSON.parse(again.raw).id, JSON.parse(answer.raw).id, 'and sending it twice creates two messages')
})

t.test('the same key and body: the stored 201 again, byte for byte, and no second message', async (t) => {
  const app = await build(t, { testAuth: true })
  // Everything JSON escapes, and more: the stored body is rendered by SQL and must match the serializer.
  const content = 'Quote " backslash \\ slash / newline \n tab \t bell \u0007 unit \u001f del \u007f é ☃ 😀 \u2028 \u2029 </script>'
  const subject = 'Sübject "quoted" \\ \r\n'
  const caller = { ...alice, name: 'Ålice "the" \\ Admin\u0001' }
  const first = await post(app, `{"content":${JSON.stringify(content)},"priority":"high","subject":${JSON.stringify(subject)}}`, { caller, key: 'order-1' })
  t.equal(first.status, 201, 'the first request creates')
  t.equal(first.replayed, undefined, 'the first answer is not a replay')
  t.equal(first.contentType, 'application/json; charset=utf-8', 'JSON, as every answer')
  const message = JSON.parse(first.raw)
  t.match(message, { id: Number, content, subject, priority: 'high', author: { id: Number, name: caller.name }, createdAt: String })
  t.equal(first.location, `/v2/messages/${String(message.id)}`, 'Location of the new message')

  const read = await app.inject({ method: 'GET', url: `/v2/messages/${String(message.id)}` })
  t.equal(first.raw, read.payload, 'the 201 body is byte for byte the serializer\'s JSON of the message')

  // The same JSON value written differently: other member order, whitespace, escapes.
  const reordered = `{\n  "subject" : ${JSON.stringify(subject)},\t"priority": "high",\n  "content": ${JSON.stringify(content).replace('é', '\\u00e9')} }`
  for (const key of ['order-1', '"order-1"']) {
    const replay = await post(app, reordered, { caller, key })
    t.same([replay.status, replay.location, replay.replayed, replay.contentType], [201, first.location, 'true', first.contentType],
      `${key}: 201, same Location, Idempotent-Replayed: true`)
    t.equal(replay.raw, first.raw, `${key}: the body is byte for byte the first one`)
  }
  t.equal(await count(app), 1, 'exactly one message')

  await app.usersRepository.upsert({ subjectId: 'alice', name: 'Renamed', email: null, role: 'User' })
  const later = await post(app, reordered, { caller, key: 'order-1' })
  t.equal(later.raw, first.raw, 'the stored answer stays as it was sent, whatever changed since')
})

t.test('the same key with another body is 422; another caller\'s key is its own', async (t) => {
  const app = await build(t, { testAuth: true })
  const first = await post(app, { content: 'pay 10' }, { caller: alice, key: 'k-1' })
  t.equal(first.status, 201)

  for (const body of [{ content: 'pay 1000' }, { content: 'pay 10', priority: 'normal' }, { content: 'pay 10', extra: 1 }]) {
    const answer = await post(app, body, { caller: alice, key: 'k-1' })
    t.same([answer.status, JSON.parse(answer.raw), answer.replayed], [422, REUSED, undefined], `${JSON.stringify(body)}: 422 with the exact body`)
  }
  t.equal(await count(app), 1, 'nothing more was created')

  const other = await post(app, { content: 'pay 10' }, { caller: bob, key: 'k-1' })
  t.same([other.status, other.replayed], [201, undefined], 'bob\'s first request with the same key creates')
  const bobsMessage = JSON.parse(other.raw)
  t.not(bobsMessage.id, JSON.parse(first.raw).id, 'a message of its own')
  t.equal(bobsMessage.author.name, 'Bob', 'written by bob')
  const bobsReplay = await post(app, { content: 'pay 10' }, { caller: bob, key: 'k-1' })
  t.same([bobsReplay.status, bobsReplay.raw, bobsReplay.replayed], [201, other.raw, 'true'], 'bob\'s retry replays bob\'s 201')
  const alicesReplay = await post(app, { content: 'pay 10' }, { caller: alice, key: 'k-1' })
  t.same([alicesReplay.raw, alicesReplay.replayed], [first.raw, 'true'], 'alice\'s retry still replays alice\'s')
  t.equal(await count(app), 2, 'two messages in all')
})

t.test('a retry storm: one message, one 201, the rest 409 or the replay', async (t) => {
  const app = await build(t, { testAuth: true })
  const storm = 50
  // A subject seen for the first time: the first request also provisions the local user.
  const caller = { sub: 'storm', role: 'User', name: 'Storm' }
  const body = { content: 'only once', priority: 'urgent' }
  const answers = await Promise.all(Array.from({ length: storm }, async () => await post(app, body, { caller, key: 'storm-key' })))

  const created = answers.filter((a) => a.status === 201 && a.replayed === undefined)
  t.equal(created.length, 1, 'exactly one answer is the original 201')
  const original = created[0]!
  const others = answers.filter((a) => a !== original)
  const unexpected = others.filter((a) => !(
    (a.status === 409 && a.raw === JSON.stringify(IN_PROGRESS) && a.retryAfter === '1') ||
    (a.status === 201 && a.replayed === 'true' && a.raw === original.raw && a.location === original.location)))
  t.same(unexpected, [], 'every other answer is 409 (exact body, Retry-After: 1) or the byte-identical replay')
  t.comment(`${others.filter((a) => a.status === 409).length} × 409, ${others.filter((a) => a.status === 201).length} × replay`)
  t.equal(await count(app, sql`content = 'only once'`), 1, 'exactly one message in the table')

  const retry = await post(app, body, { caller, key: 'storm-key' })
  t.same([retry.status, retry.raw, retry.location, retry.replayed], [201, original.raw, original.location, 'true'], 'a later retry is the replay')
})

t.test('while the first request runs: 409 with Retry-After: 1; a 5xx is not stored', async (t) => {
  const audience = 'messages-api-test'
  const idp = await startTestIdp(t, { audience })
  const app = await build(t, { config: { authIssuer: idp.url, apiAudience: audience } })
  const token = await idp.sign({ sub: 'slow', name: 'Slow' })
  const send = async (key: string) => await app.inject({
    method: 'POST',
    url: '/v2/messages',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key },
    payload: { content: 'held' }
  })

  // A subject's first create provisions its local user from userinfo: held there, the request is running.
  idp.userinfoHandler = () => ({ status: 503, body: { error: 'down' } })
  const failed = await send('slow-key')
  t.same([failed.statusCode, failed.json()], [502, { error: 'Failed to reach identity provider' }], 'a 502')

  let release = () => {}
  const held = new Promise<void>((resolve) => { release = resolve })
  let arrived = () => {}
  const reached = new Promise<void>((resolve) => { arrived = resolve })
  idp.userinfoHandler = async ({ defaultReply }) => {
    arrived()
    await held
    return defaultReply
  }
  const first = send('slow-key')
  await reached
  const during = await send('slow-key')
  t.same([during.statusCode, during.json(), during.headers['retry-after']], [409, IN_PROGRESS, '1'], '409, the exact body, Retry-After: 1')
  const other = await app.inject({
    method: 'POST',
    url: '/v2/messages',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': '"slow-key"' },
    payload: { content: 'another body' }
  })
  t.equal(other.statusCode, 409, 'the quoted form is the same key, in progress whatever the body')
  release()
  const created = await first
  t.same([created.statusCode, created.headers['idempotent-replayed']], [201, undefined], 'the request that failed with 502 was retried and created')
  const after = await send('slow-key')
  t.same([after.statusCode, after.payload, after.headers['idempotent-replayed']], [201, created.payload, 'true'], 'once it is done, the replay')
  t.equal(await count(app), 1, 'one message')
})

t.test('several instances on one database: a concurrent duplicate never writes a second message', async (t) => {
  const app = await build(t, { testAuth: true })
  await createAuthor(app, 'multi', { name: 'Multi' })
  // Each is what one more instance holds: its own grouped writer and its own running keys.
  const instances = Array.from({ length: 4 }, () => createMessagesRepository(app.db, primaryOnly(app.db), {
    localUser: async () => { throw new Error('the author exists') },
    idempotency: createIdempotencyRepository(app.db, { ttlHours: 24 })
  }))
  const caller = { sub: 'multi', role: 'User' }
  const input = { content: 'across instances' }
  const outcomes = await Promise.all(Array.from({ length: 40 }, async (_, i) => {
    const instance = instances[i % instances.length]!
    try {
      return await instance.create(caller, input, 'shared')
    } catch (err) {
      return { error: (err as { statusCode?: number }).statusCode }
    }
  }))
  const created = outcomes.filter((o) => 'replayed' in o && !o.replayed)
  t.equal(created.length, 1, 'one request created')
  const body = 'body' in created[0]! ? created[0].body : ''
  t.same(outcomes.filter((o) => !('error' in o && o.error === 409) && !('replayed' in o && (!o.replayed || o.body === body))), [],
    'every other one got 409 or the stored answer, never a 500')
  const replays = outcomes.filter((o) => 'replayed' in o && o.replayed).length
  t.ok(replays >= instances.length - 1, `the first request on each other instance found the key taken and replayed (${replays} replays)`)
  t.equal(await count(app, sql`content = 'across instances'`), 1, 'one message')
  t.equal((await keyRows(app)).length, 1, 'one stored key')
})

t.test('keys inside grouped inserts: each key maps to its own message', async (t) => {
  const app = await build(t, { testAuth: true })
  await createAuthor(app, 'alice', { name: 'Alice' })
  await createAuthor(app, 'bob', { name: 'Bob' })
  const n = 60
  // Keyed and plain creates, of two callers, all at once: they share grouped statements.
  const requests = Array.from({ length: n }, (_, i) => ({
    caller: i % 2 === 0 ? alice : bob,
    key: i % 3 === 0 ? undefined : `batch-${i}`,
    body: { content: `grouped ${i}`, priority: i % 4 === 0 ? 'low' : 'normal' }
  }))
  const answers = await Promise.all(requests.map(async (r) => await post(app, r.body, { caller: r.caller, key: r.key })))
  t.same(answers.map((a) => a.status), requests.map(() => 201), 'every create is 201')
  const messages = answers.map((a) => JSON.parse(a.raw))
  t.same(messages.map((m) => [m.content, m.priority, m.author.name]), requests.map((r) => [r.body.content, r.body.priority, r.caller.name]),
    'each answer holds its own request\'s message')
  t.same(answers.map((a, i) => a.location), messages.map((m) => `/v2/messages/${String(m.id)}`), 'each Location names its message')
  t.equal(new Set(messages.map((m) => m.id)).size, n, 'distinct messages')
  t.equal(await count(app, sql`content like 'grouped %'`), n, 'one row per request')

  const stored = await keyRows(app)
  const expected = requests.flatMap((r, i) => r.key === undefined ? [] : [{ subject_id: r.caller.sub, key: r.key, message_id: messages[i].id, body: answers[i]!.raw }])
  t.same(stored, expected.sort(byKey),
    'each key is stored with its own message and the exact body sent')

  const replays = await Promise.all(requests.map(async (r) => r.key === undefined ? undefined : await post(app, r.body, { caller: r.caller, key: r.key })))
  const mismatched = replays.flatMap((replay, i) => replay === undefined ? [] : replay.status === 201 && replay.replayed === 'true' && replay.raw === answers[i]!.raw && replay.location === answers[i]!.location ? [] : [i])
  t.same(mismatched, [], 'every replay, concurrent too, is identical to its first answer')
  t.equal(await count(app, sql`content like 'grouped %'`), n, 'and creates nothing')
})

t.test('a failed request stores nothing: the same key may be sent again', async (t) => {
  const app = await build(t, { testAuth: true })
  const invalid = await post(app, { content: '   ' }, { caller: alice, key: 'fix-me' })
  t.same([invalid.status, JSON.parse(invalid.raw)], [400, { error: 'Validation failed', details: ['content is required and must be a string'] }], 'a validation failure')
  const malformed = await post(app, '{"content":', { caller: alice, key: 'fix-me' })
  t.same([malformed.status, JSON.parse(malformed.raw)], [400, { error: 'Malformed JSON body' }], 'malformed JSON')
  const anonymous = await post(app, { content: 'fixed' }, { key: 'fix-me' })
  t.same([anonymous.status, JSON.parse(anonymous.raw)], [401, { error: 'Invalid or missing token' }], 'no caller')
  t.same(await keyRows(app), [], 'none of them stored the key')

  const fixed = await post(app, { content: 'fixed' }, { caller: alice, key: 'fix-me' })
  t.same([fixed.status, fixed.replayed, JSON.parse(fixed.raw).content], [201, undefined, 'fixed'], 'the corrected request creates afresh')
  t.equal(await count(app), 1, 'one message')
})

t.test('keys expire after IDEMPOTENCY_TTL_HOURS and are pruned', async (t) => {
  const app = await build(t, { testAuth: true, config: { idempotencyTtlHours: 2 } })
  const age = async (key: string, interval: string) => {
    await app.db.execute(sql`update idempotency_keys set created_at = now() - ${interval}::interval where key = ${key}`)
  }
  const first = await post(app, { content: 'ttl' }, { caller: alice, key: 'old' })
  await age('old', '90 minutes')
  const kept = await post(app, { content: 'ttl' }, { caller: alice, key: 'old' })
  t.same([kept.status, kept.raw, kept.replayed], [201, first.raw, 'true'], 'within the TTL: the replay')
  t.equal(await app.idempotencyRepository.prune(), 0, 'pruning leaves a live key')

  await age('old', '121 minutes')
  const fresh = await post(app, { content: 'ttl' }, { caller: alice, key: 'old' })
  t.same([fresh.status, fresh.replayed], [201, undefined], 'past the TTL, before any pruning: a new request')
  t.not(JSON.parse(fresh.raw).id, JSON.parse(first.raw).id, 'with a new message')
  const again = await post(app, { content: 'ttl' }, { caller: alice, key: 'old' })
  t.same([again.raw, again.replayed], [fresh.raw, 'true'], 'whose answer the key now replays')

  await age('old', '3 hours')
  const other = await post(app, { content: 'another body' }, { caller: alice, key: 'old' })
  t.same([other.status, other.replayed], [201, undefined], 'an expired key takes any body')
  await post(app, { content: 'live' }, { caller: alice, key: 'live' })
  await age('old', '3 hours')
  t.equal(await app.idempotencyRepository.prune(), 1, 'pruning deletes the expired key')
  t.same((await keyRows(app)).map((row) => row.key), ['live'], 'and only that one')
  t.equal(await count(app), 4, 'messages are never pruned')
})

t.test('the OpenAPI document shows the header and the answers', async (t) => {
  const app = await build(t, { testAuth: true })
  const document = (await app.inject({ method: 'GET', url: '/api-docs/json' })).json()
  const operation = document.paths['/v2/messages'].post
  const header = operation.parameters.find((p: { in: string, name: string }) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key')
  t.match(header, { in: 'header', required: false, schema: { type: 'string' }, description: /255 visible ASCII/ }, 'the Idempotency-Key parameter')
  t.match(operation.responses['201'], { headers: { Location: { schema: { type: 'string' } }, 'Idempotent-Replayed': { description: String } } }, '201 documents its headers')
  t.match(operation.responses['409'], { description: /in progress/, headers: { 'Retry-After': { schema: { type: 'integer' } } } }, '409 documented')
  t.match(operation.responses['422'], { description: /different request/ }, '422 documented')
  t.same(operation.responses['201'].content['application/json'].schema, { $ref: '#/components/schemas/Message' }, 'the 201 body is a Message')
})

// A real server process, real RS256 tokens, killed with SIGKILL: the message and its stored 201 are
// committed together, and a retry after the restart finds them.
t.test('SIGKILL and a restart: every key still answers once, byte for byte', async (t) => {
  const audience = 'messages-api-test'
  const idp = await startTestIdp(t, { audience })
  const db = await processDatabase(t)
  const env = { ...db.env, AUTH_ISSUER: idp.url, API_AUDIENCE: audience, MAX_EVENT_LOOP_DELAY_MS: '0' }
  const token = await idp.sign({ sub: 'crash', role: 'User', email: 'crash@example.com', name: 'Crash' })
  const agent = new Agent({ connections: 32 })
  t.teardown(async () => { await agent.close() })

  interface Sent { status?: number, raw?: string, location?: string, replayed?: string }
  const send = async (server: ServerProcess, key: string, content: string): Promise<Sent> => {
    try {
      const response = await request(`${server.url}/v2/messages`, {
        method: 'POST',
        dispatcher: agent,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ content })
      })
      const raw = await response.body.text()
      const header = (name: string) => response.headers[name] === undefined ? undefined : String(response.headers[name])
      return { status: response.statusCode, raw, location: header('location'), replayed: header('idempotent-replayed') }
    } catch {
      return {}
    }
  }

  const server = await startServer(t, env, db.cwd)
  const acknowledged = await send(server, 'before-kill', 'acknowledged before the kill')
  t.equal(acknowledged.status, 201, 'a 201 before the kill')
  // A burst of keyed creates with the kill in its middle: some answered, some never.
  const burst = 80
  let answered = 0
  const firsts = await Promise.all(Array.from({ length: burst }, async (_, i) => {
    const sent = await send(server, `burst-${i}`, `burst ${i}`)
    if (++answered === 20) server.child.kill('SIGKILL')
    return sent
  }))
  await server.exited

  // Atomic: no key without its message, no message of the burst without its key.
  const orphans = await db.query<{ key: string }>(`select k.key from idempotency_keys k left join messages m on m.id = k.message_id where m.id is null
    union all select m.content from messages m where not exists (select 1 from idempotency_keys k where k.message_id = m.id)`)
  t.same(orphans, [], 'after the crash, every stored key has its message and every message its key')

  await sleep(100)
  const restarted = await startServer(t, env, db.cwd)
  const replay = await send(restarted, 'before-kill', 'acknowledged before the kill')
  t.same(replay, { ...acknowledged, replayed: 'true' }, 'the 201 acknowledged before the kill is replayed byte for byte')

  const retries = await Promise.all(Array.from({ length: burst }, async (_, i) => await send(restarted, `burst-${i}`, `burst ${i}`)))
  const wrong = retries.flatMap((retry, i) => {
    const first = firsts[i]!
    if (first.status === 201) return retry.status === 201 && retry.replayed === 'true' && retry.raw === first.raw && retry.location === first.location ? [] : [{ i, first, retry }]
    // Never answered: it was written before the kill (then replayed) or not (then created now).
    return retry.status === 201 ? [] : [{ i, first, retry }]
  })
  t.same(wrong, [], 'each retry replays the answer received, or answers the one never received')
  t.ok(firsts.some((f) => f.status === 201), `${firsts.filter((f) => f.status === 201).length} of the burst were answered before the kill`)

  restarted.child.kill('SIGTERM')
  await restarted.exited
  const rows = await db.query<{ content: string, n: number }>("select content, count(*)::int as n from messages group by content having count(*) <> 1 or content not like 'burst %' order by content")
  t.same(rows, [{ content: 'acknowledged before the kill', n: 1 }], 'exactly one message per key')
  const [total] = await db.query<{ n: number }>('select count(*)::int as n from messages')
  t.equal(total?.n, burst + 1, 'every key has its message')
})
