import { count, eq } from 'drizzle-orm'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { buildApp, type App } from '../../src/app.js'
import { messages, users } from '../../src/db/schema.js'
import { bounded } from '../helpers/bounded.js'
import { build, testConfig } from '../helpers/build.js'
import { startTestIdp } from '../helpers/idp.js'
import { startPgCluster } from '../../scripts/postgres/throwaway-cluster.js'

// Faults while running (docs/operations.md, "Faults"): the database goes away and comes back, on a
// throwaway PostgreSQL server of the machine's own binaries that this file owns, whether or not
// TEST_DATABASE_URL is set. Nothing is mocked; the app is never restarted.

const DATABASE = 'faults'
const APP_NAME = 'messages-api'
// Every answer during a fault comes within this bound: a refused connection is an error, not a wait.
const ANSWER_MS = 2_500
const alice = { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'Admin', email: 'alice@example.com', name: 'Alice' }) }

const OK = { ok: true }
const UNAVAILABLE = { error: 'Database unavailable' }
const INTERNAL = { error: 'Internal server error' }
// A write the database cannot take (CONTRACT 14): refused, to be retried, never a 500.
const WRITE_REFUSED = { error: 'Service unavailable' }
const retrieveFailed = (collection: string) => ({ error: `Failed to retrieve ${collection}` })

interface Answer { status: number, body: unknown, ms: number }

async function call (app: App, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object): Promise<Answer> {
  const started = Date.now()
  const res = await bounded(app.inject({ method, url, headers: alice, ...(payload === undefined ? {} : { payload }) }), ANSWER_MS + 5_000)
  return { status: res.statusCode, body: res.body === '' ? null : res.json(), ms: Date.now() - started }
}

/**
 * The messages the API acknowledged and has not deleted: after every fault the table must hold
 * exactly these, nothing half-written by a request that failed.
 */
class Ledger {
  readonly ids = new Set<number>()
  #n = 0

  constructor (readonly app: App) {}

  async post (): Promise<Answer & { id?: number }> {
    const answer = await call(this.app, 'POST', '/v2/messages', { content: `fault message ${++this.#n}`, subject: 'faults' })
    const id = answer.status === 201 ? (answer.body as { id: number }).id : undefined
    if (id !== undefined) this.ids.add(id)
    return { ...answer, ...(id === undefined ? {} : { id }) }
  }

  async delete (id: number): Promise<Answer> {
    const answer = await call(this.app, 'DELETE', `/v2/messages/${id}`)
    if (answer.status === 204) this.ids.delete(id)
    return answer
  }
}

// Each call reads a page never read before, so no answer comes from the page cache by accident.
let pageSize = 0
const freshLimit = (): number => (pageSize++ % 100) + 1

type Expect = Record<string, { status: number, body?: unknown }>

/**
 * One request to every route that touches the database (and /health, /v2/hello that do not),
 * checked against `expect`; every answer must come within ANSWER_MS.
 */
async function everyRoute (t: Test, ledger: Ledger, expect: Expect, label: string): Promise<void> {
  const { app } = ledger
  // A message of alice's to read and one to delete; made now when the database answers, else the last acknowledged.
  const known = [...ledger.ids].at(0) ?? 1
  const victim = [...ledger.ids].at(-1) ?? 1
  const answers: Record<string, Answer> = {
    health: await call(app, 'GET', '/health'),
    ready: await call(app, 'GET', '/health/ready'),
    list: await call(app, 'GET', `/v2/messages?limit=${freshLimit()}&sort=createdAt&order=desc`),
    search: await call(app, 'GET', `/v2/messages/search?q=fault&limit=${freshLimit()}`),
    byId: await call(app, 'GET', `/v2/messages/${known}`),
    post: await ledger.post(),
    delete: await ledger.delete(victim),
    users: await call(app, 'GET', `/v2/users?role=Admin&limit=${freshLimit()}`),
    me: await call(app, 'GET', '/v2/users/me'),
    movies: await call(app, 'GET', `/v2/movies?genre=Drama&limit=${freshLimit()}`),
    hello: await call(app, 'GET', '/v2/hello')
  }
  for (const [route, want] of Object.entries(expect)) {
    const got = answers[route]!
    const compared = want.body === undefined ? { status: got.status } : { status: got.status, body: got.body }
    t.same(compared, want, `${label}: ${route}`)
    t.ok(got.ms < ANSWER_MS, `${label}: ${route} answered in ${got.ms} ms`)
  }
}

const HEALTHY: Expect = {
  health: { status: 200, body: OK },
  ready: { status: 200, body: OK },
  list: { status: 200 },
  search: { status: 200 },
  byId: { status: 200 },
  post: { status: 201 },
  delete: { status: 204, body: null },
  users: { status: 200 },
  me: { status: 200 },
  movies: { status: 200 },
  hello: { status: 200, body: { message: 'Hello, alice@example.com!', role: 'Admin' } }
}

t.test('the database goes away and comes back: defined errors, then recovery without a restart', async (t) => {
  const cluster = await startPgCluster({ replica: false })
  t.teardown(() => cluster.stop())
  const setup = postgres(cluster.primaryUrl(), { max: 1, onnotice: () => {} })
  await setup.unsafe(`create database ${DATABASE}`)
  await setup.end()

  const app = await buildApp(testConfig({ databaseUrl: cluster.primaryUrl(DATABASE), databasePoolSize: 4 }), { logger: false, testAuth: true })
  t.teardown(() => app.close())
  const ledger = new Ledger(app)
  // Opened per phase and closed before the server is stopped, so it never holds a dead connection.
  const withAdmin = async <T>(run: (sql: postgres.Sql) => Promise<T>): Promise<T> => {
    const sql = postgres(cluster.primaryUrl(DATABASE), { max: 1, onnotice: () => {} })
    try {
      return await run(sql)
    } finally {
      await sql.end({ timeout: 5 })
    }
  }
  const storedIds = async (): Promise<number[]> => await withAdmin(async (sql) =>
    (await sql<Array<{ id: number }>>`select id from messages order by id`).map((row) => row.id))
  const nothingHalfWritten = async (t: Test, label: string): Promise<void> => {
    t.same(await storedIds(), [...ledger.ids].sort((a, b) => a - b), `${label}: the table holds exactly the acknowledged messages`)
  }

  for (let i = 0; i < 6; i++) t.equal((await ledger.post()).status, 201)
  await everyRoute(t, ledger, HEALTHY, 'before any fault')

  await t.test('the server stops (pg_ctl stop): every route its defined error; it starts again: every route works', async (t) => {
    cluster.stopPrimary()
    const before = [...ledger.ids]
    const down: Expect = {
      health: { status: 200, body: OK },
      ready: { status: 503, body: UNAVAILABLE },
      list: { status: 500, body: retrieveFailed('messages') },
      search: { status: 500, body: retrieveFailed('messages') },
      byId: { status: 500, body: INTERNAL },
      post: { status: 503, body: WRITE_REFUSED },
      delete: { status: 503, body: WRITE_REFUSED },
      users: { status: 500, body: retrieveFailed('users') },
      me: { status: 500, body: INTERNAL },
      movies: { status: 500, body: retrieveFailed('movies') },
      // The greeting reads the token's email and never the database.
      hello: HEALTHY.hello!
    }
    // Several rounds: the driver's reconnect delay grows with every failed attempt.
    for (let round = 1; round <= 4; round++) await everyRoute(t, ledger, down, `server stopped (${round})`)
    t.same([...ledger.ids], before, 'nothing acknowledged while the server was stopped')

    cluster.startPrimary()
    await everyRoute(t, ledger, HEALTHY, 'first requests after the restart')
    await everyRoute(t, ledger, HEALTHY, 'and the next')
    await nothingHalfWritten(t, 'after the restart')
  })
  const appBackends = async (sql: postgres.Sql): Promise<number[]> =>
    (await sql<Array<{ pid: number }>>`select pid from pg_stat_activity where datname = ${DATABASE} and application_name = ${APP_NAME}`).map((row) => row.pid)
  // pg_terminate_backend only signals: wait until the backends are gone.
  const terminate = async (sql: postgres.Sql, pids: number[]): Promise<void> => {
    await sql`select pg_terminate_backend(pid) from unnest(${pids}::int[]) as pid`
    for (let i = 0; i < 100; i++) {
      const [left] = await sql<Array<{ n: number }>>`select count(*)::int as n from pg_stat_activity where pid = any(${pids}::int[])`
      if (left?.n === 0) return
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    throw new Error('terminated backends did not exit')
  }
  // Enough parallel reads that the pool opens all its connections.
  const fillPool = async (): Promise<void> => {
    await Promise.all(Array.from({ length: 12 }, async (_, i) => await call(app, 'GET', `/v2/messages?limit=${i + 1}`)))
  }

  await t.test('pg_terminate_backend of every idle connection: the next requests all succeed', async (t) => {
    await fillPool()
    const pids = await withAdmin(async (sql) => {
      const pids = await appBackends(sql)
      await terminate(sql, pids)
      return pids
    })
    // The backends are gone; the app's sockets see their close on its next turn of I/O. A query sent
    // in that same instant would be on a dying connection, which is the in-flight case below.
    await new Promise((resolve) => setTimeout(resolve, 100))
    t.ok(pids.length >= 2, `${pids.length} connections of the app terminated`)
    await everyRoute(t, ledger, HEALTHY, 'right after the connections were killed')
    const fresh = await withAdmin(appBackends)
    t.ok(fresh.length >= 1 && fresh.every((pid) => !pids.includes(pid)), 'served by new connections')
    await nothingHalfWritten(t, 'after the kill')
  })

  await t.test('pg_terminate_backend while requests are in flight: exactly those fail, with their defined error', async (t) => {
    await fillPool()
    // One client holds a lock the requests wait on, so they are in flight when their backends die;
    // another watches and kills (pg_stat_activity is a snapshot per transaction).
    await withAdmin(async (watcher) => await withAdmin(async (locker) => {
      const known = [...ledger.ids][0]!
      let inFlight: Array<Promise<Answer>> = []
      await locker.begin(async (tx) => {
        await tx`lock table messages in access exclusive mode`
        inFlight = [
          call(app, 'GET', `/v2/messages?limit=${freshLimit()}&order=desc`),
          call(app, 'GET', `/v2/messages/${known}`),
          ledger.post(),
          ledger.post()
        ]
        let waiting: number[] = []
        for (let i = 0; i < 100 && waiting.length < inFlight.length; i++) {
          await new Promise((resolve) => setTimeout(resolve, 50))
          waiting = (await watcher<Array<{ pid: number }>>`select pid from pg_stat_activity
            where datname = ${DATABASE} and application_name = ${APP_NAME} and wait_event_type = 'Lock'`).map((row) => row.pid)
        }
        t.equal(waiting.length, inFlight.length, 'every request is waiting inside the database')
        await terminate(watcher, waiting)
      })
      const answers = (await Promise.all(inFlight)).map(({ status, body }) => ({ status, body }))
      t.same(answers, [
        { status: 500, body: retrieveFailed('messages') },
        { status: 500, body: INTERNAL },
        { status: 503, body: WRITE_REFUSED },
        { status: 503, body: WRITE_REFUSED }
      ], 'the requests whose connection was killed under them (writes: refused, to be retried)')
    }))
    await everyRoute(t, ledger, HEALTHY, 'the requests after the kill')
    await nothingHalfWritten(t, 'after the kill in flight')
  })

  await t.test('tables renamed away and back: the defined errors, then recovery of every prepared statement', async (t) => {
    const rename = async (from: string, to: string): Promise<void> => {
      await withAdmin(async (sql) => { await sql.unsafe(`alter table ${from} rename to ${to}`) })
    }
    // Every pool connection has prepared the statements of every route before the rename.
    const warmUp = async (): Promise<void> => {
      for (let i = 0; i < 3; i++) {
        await Promise.all([fillPool(), call(app, 'GET', '/v2/messages/search?q=fault'), call(app, 'GET', '/v2/users'), call(app, 'GET', '/v2/movies')])
      }
    }
    const healthyEverywhere = async (label: string): Promise<void> => {
      await everyRoute(t, ledger, HEALTHY, label)
      // Concurrently too, so that each connection's own prepared statements are used again.
      const answers = await Promise.all(Array.from({ length: 12 }, async (_, i) => await call(app, 'GET', i % 2 === 0 ? `/v2/messages?limit=${i + 1}` : `/v2/messages/search?q=fault&limit=${i}`)))
      t.same(answers.map((answer) => answer.status), answers.map(() => 200), `${label}: concurrent pages on every connection`)
    }

    await warmUp()
    const remembered = await call(app, 'GET', '/v2/messages?limit=3')
    await rename('messages', 'messages_away')
    // A page already read at the versions the database still reports is answered from memory.
    t.same(await call(app, 'GET', '/v2/messages?limit=3').then(({ status, body }) => ({ status, body })), { status: 200, body: remembered.body },
      'a page read before the rename, nothing written since: served from the page cache')
    const messagesAway: Expect = {
      ...HEALTHY,
      list: { status: 500, body: retrieveFailed('messages') },
      search: { status: 500, body: retrieveFailed('messages') },
      byId: { status: 500, body: INTERNAL },
      post: { status: 500, body: INTERNAL },
      delete: { status: 500, body: INTERNAL }
    }
    for (let round = 1; round <= 2; round++) await everyRoute(t, ledger, messagesAway, `messages renamed away (${round})`)
    await rename('messages_away', 'messages')
    await healthyEverywhere('messages renamed back')

    await warmUp()
    await rename('users', 'users_away')
    const usersAway: Expect = {
      ...messagesAway,
      users: { status: 500, body: retrieveFailed('users') },
      me: { status: 500, body: INTERNAL }
    }
    for (let round = 1; round <= 2; round++) await everyRoute(t, ledger, usersAway, `users renamed away (${round})`)
    await rename('users_away', 'users')
    await healthyEverywhere('users renamed back')
    await nothingHalfWritten(t, 'after the renames')
  })
})

// The identity provider goes away entirely (key set and userinfo: connections refused), with real
// RS256 tokens. The outages of one endpoint at a time are in test/auth/auth.test.ts and
// test/users/local-users.test.ts.
t.test('the identity provider goes away: known subjects keep working, a new one gets 502 and nothing is written', async (t) => {
  const AUDIENCE = 'backend-3-messages'
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const app = await build(t, { config: { authIssuer: idp.url, apiAudience: AUDIENCE } })
  const as = async (token: string, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object): Promise<Answer> => {
    const started = Date.now()
    const res = await bounded(app.inject({ method, url, headers: { authorization: `Bearer ${token}` }, ...(payload === undefined ? {} : { payload }) }), ANSWER_MS + 5_000)
    return { status: res.statusCode, body: res.body === '' ? null : res.json(), ms: Date.now() - started }
  }
  const strip = ({ status, body }: Answer) => ({ status, body })
  const rowsOf = async (sub: string) => await app.db.select().from(users).where(eq(users.subjectId, sub))
  const messageCount = async (): Promise<number> => (await app.db.select({ n: count() }).from(messages))[0]?.n ?? 0

  // kate is known: provisioned and her key fetched while the provider was up. nina has never been seen.
  const kate = await idp.sign({ sub: 'kate', role: 'Admin', email: 'kate@example.com', name: 'Kate' })
  const nina = await idp.sign({ sub: 'nina', role: 'User', name: 'Nina' }, { omit: ['email'] })
  const beforeOutage = await as(kate, 'POST', '/v2/messages', { content: 'before the outage' })
  t.equal(beforeOutage.status, 201)
  const kateMessageId = (beforeOutage.body as { id: number }).id
  const kateId = (await rowsOf('kate'))[0]?.id
  t.equal(idp.jwksRequests, 1)
  t.equal(idp.userinfoRequests, 1)

  await idp.stop()
  const refused = await fetch(`${idp.url}/.well-known/jwks.json`).then(() => false, () => true)
  t.ok(refused, 'the provider refuses connections')
  const acknowledged = await messageCount()

  await t.test('a known subject keeps working on the cached key, also with a token minted during the outage', async (t) => {
    const later = await idp.sign({ sub: 'kate', role: 'Admin', email: 'kate@example.com', name: 'Kate', iat: Math.floor(Date.now() / 1000) - 1 })
    for (const token of [kate, later]) {
      const created = await as(token, 'POST', '/v2/messages', { content: 'during the outage' })
      t.match(strip(created), { status: 201, body: { content: 'during the outage', author: { id: kateId, name: 'Kate' } } })
      t.same(strip(await as(token, 'GET', '/v2/hello')), { status: 200, body: { message: 'Hello, kate@example.com!', role: 'Admin' } })
      t.match(strip(await as(token, 'GET', '/v2/users/me')), { status: 200, body: { id: kateId, subjectId: 'kate' } })
      t.match(strip(await as(token, 'GET', '/v2/users')), { status: 200, body: { pagination: { total: 1 } } })
      t.same(strip(await as(token, 'DELETE', `/v2/messages/${(created.body as { id: number }).id}`)), { status: 204, body: null })
    }
  })

  await t.test('a new subject gets 502 on every route that needs its local user, quickly, and nothing is written', async (t) => {
    const failed = { status: 502, body: { error: 'Failed to reach identity provider' } }
    const answers = [
      await as(nina, 'POST', '/v2/messages', { content: 'never written' }),
      await as(nina, 'GET', '/v2/users/me'),
      await as(nina, 'GET', `/v2/users/${kateId ?? 1}`),
      await as(nina, 'DELETE', `/v2/messages/${kateMessageId}`),
      ...await Promise.all(Array.from({ length: 5 }, async () => await as(nina, 'POST', '/v2/messages', { content: 'never written either' })))
    ]
    for (const answer of answers) {
      t.same(strip(answer), failed)
      t.ok(answer.ms < ANSWER_MS, `answered in ${answer.ms} ms`)
    }
    // Public routes do not need the provider at all, nor does a delete of a message that is not there.
    t.equal((await as(nina, 'GET', '/v2/messages')).status, 200)
    t.same(strip(await as(nina, 'DELETE', '/v2/messages/999999')), { status: 404, body: { error: 'Message not found' } })
    t.same(await rowsOf('nina'), [], 'no local user')
    t.equal(await messageCount(), acknowledged, 'no message')
  })

  await t.test('the provider comes back: the new subject is provisioned once and works', async (t) => {
    await idp.restart()
    const before = idp.userinfoRequests
    t.match(strip(await as(nina, 'POST', '/v2/messages', { content: 'after the outage' })), { status: 201, body: { author: { name: 'Nina' } } })
    t.match(strip(await as(nina, 'GET', '/v2/users/me')), { status: 200, body: { subjectId: 'nina', email: 'nina@example.com', role: 'User' } })
    t.equal((await rowsOf('nina')).length, 1, 'one local user')
    t.equal(idp.userinfoRequests - before, 1, 'one userinfo call')
    t.equal(await messageCount(), acknowledged + 1)
  })
})
