import { sql } from 'drizzle-orm'
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import changes, { changesOptions } from '../../plugins/changes.js'
import db from '../../plugins/db.js'
import errors from '../../plugins/errors.js'
import { testConfig } from '../helpers/build.js'
import { bounded, NOT_HUNG_MS } from '../helpers/bounded.js'
import { freshDatabase } from '../helpers/database.js'
import { queryRows } from '../helpers/fixtures.js'

// plugins/changes.ts on a bare Fastify, with the database it depends on (real) and the error shape of
// plugins/errors.ts. A route hands the plugin's poll what the messages router hands it; another writes
// a message through the app. On a PostgreSQL server that others use too, the feed may hold back changes
// behind their open transactions (hasMore: true), so a client follows `next` until hasMore is false.

const config = testConfig()

async function appFor (t: Test): Promise<FastifyInstance> {
  const database = await freshDatabase()
  // As src/app.ts: a first start opens the database and applies migrations, which can take a while.
  const app = Fastify({ pluginTimeout: 120_000 })
  t.teardown(async () => {
    await app.close()
    await database.drop()
  })
  await app.register(errors, { development: false })
  await app.register(db, { url: database.dataDir === undefined ? database.url : undefined, dataDir: database.dataDir })
  await app.register(changes, changesOptions(config))
  app.get<{ Querystring: { since?: string, wait?: string } }>('/changes', async (request, reply) => {
    const answer = await app.changes.poll(reply, { since: request.query.since, limit: 100, wait: Number(request.query.wait ?? 0), address: request.ip })
    return reply.type('application/json; charset=utf-8').send(answer)
  })
  app.post('/write', async (_request, reply) => {
    const [row] = await queryRows<{ id: number }>(app.db, sql`INSERT INTO messages (content, author_id)
      SELECT 'written', id FROM users WHERE subject_id = 'alice' RETURNING id::float8 AS id`)
    return reply.code(201).send({ id: row!.id })
  })
  await app.ready()
  await app.db.execute(sql`INSERT INTO users (subject_id, name) VALUES ('alice', 'Alice')`)
  return app
}

const poll = async (app: FastifyInstance, query = '', within = NOT_HUNG_MS) => {
  const response = await bounded(app.inject({ method: 'GET', url: `/changes${query}` }), within)
  return { status: response.statusCode, body: response.json() }
}

/** What a client holds after following `next` from `since` until an answer says hasMore: false. */
async function follow (app: FastifyInstance, since?: string, first?: { status: number, body: { data: unknown[], next: string, hasMore: boolean } }) {
  const data: unknown[] = []
  let answer = first ?? await poll(app, since === undefined ? '' : `?since=${since}`)
  for (;;) {
    if (answer.status !== 200) throw new Error(`status ${answer.status}`)
    data.push(...answer.body.data)
    if (!answer.body.hasMore) return { data, next: answer.body.next }
    answer = await poll(app, `?since=${answer.body.next}`)
  }
}

// CONTRACT 12: a message may appear more than once; what counts is what a client holds after
// applying every answer in order.
const heldIds = (data: unknown[]): number[] => {
  const held = new Set<number>()
  for (const change of data as Array<{ op: string, id: number }>) {
    if (change.op === 'delete') held.delete(change.id)
    else held.add(change.id)
  }
  return [...held].sort((a, b) => a - b)
}

const upsertOf = (body: { id: number }, content: string) => ({
  op: 'upsert', id: body.id, message: { id: body.id, content, subject: null, priority: 'normal', author: { id: Number, name: 'Alice' }, createdAt: String }
})

t.test('a poll: every message first, then what changed since the token', async (t) => {
  const app = await appFor(t)
  const first = (await app.inject({ method: 'POST', url: '/write' })).json()
  const copy = await follow(app)
  t.match(copy, { data: [upsertOf(first, 'written')], next: String }, 'the initial copy')
  t.strictSame(heldIds(copy.data), [first.id], 'holds the one message')
  const since = await follow(app, copy.next)
  t.ok(since.data.every((change) => (change as { id: number }).id === first.id), 'nothing since, but the message again at most')
  t.same(await poll(app, '?since=nonsense'), { status: 400, body: { error: 'Invalid sync token' } }, 'a malformed token')
})

t.test('a held poll is answered once a write through the app can be shown, not when its wait ends', async (t) => {
  const app = await appFor(t)
  const { next } = await follow(app)
  // Bounded well inside its wait: only the write can answer it in time.
  const held = poll(app, `?since=${next}&wait=60`, 30_000)
  const written = (await app.inject({ method: 'POST', url: '/write' })).json()
  const answer = await follow(app, undefined, await held)
  t.match(answer, { data: [upsertOf(written, 'written')], next: String })
  t.strictSame(heldIds(answer.data), [written.id], 'the one message written')
})

t.test('closing the app answers a held poll at once, with nothing and a token', async (t) => {
  const app = await appFor(t)
  const { next } = await follow(app)
  // Bounded well inside its wait: only the close can answer it in time.
  const held = poll(app, `?since=${next}&wait=60`, 30_000)
  // The poll is held once the statement that found nothing has answered.
  await new Promise((resolve) => setTimeout(resolve, 500))
  await bounded(app.close(), NOT_HUNG_MS)
  t.match(await held, { status: 200, body: { data: [], next: String, hasMore: false } })
})
