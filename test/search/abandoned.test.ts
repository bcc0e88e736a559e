import postgres from 'postgres'
import t from 'tap'
import { Agent, request } from 'undici'
import { buildApp } from '../../src/app.js'
import { HEAVY_READS_PER_CLIENT, heavyReadCounts } from '../../src/db/heavy-reads.js'
import { NOT_HUNG_MS } from '../helpers/bounded.js'
import { testConfig } from '../helpers/build.js'
import { freshDatabase, onPostgresServer } from '../helpers/database.js'
import { createAuthor, createMessages } from '../helpers/fixtures.js'

// CONTRACT 16 on PostgreSQL, on a listening server: a search whose client disconnects is given up.
// Running, its statement is cancelled; still waiting for a place, it never reaches the database. The
// searches are held by a lock on messages that the test keeps in a session of its own, and the
// statement timeout is far longer than the test, so that only a cancellation can end a statement.

const CLIENT = '127.0.0.2'

t.test('a search whose client has gone is cancelled if it runs, and never starts if it waits', async (t) => {
  await onPostgresServer(t)
  const database = await freshDatabase()
  const lines: Array<{ level: number, msg?: string }> = []
  const app = await buildApp(testConfig({ databaseUrl: database.url, databaseStatementTimeoutMs: 600_000 }),
    { logger: { level: 'debug', stream: { write: (line: string) => { lines.push(JSON.parse(line) as { level: number }) } } } })
  let unlock!: () => void
  const unlocked = new Promise<void>((resolve) => { unlock = resolve })
  t.teardown(async () => {
    // Also when the test fails midway: the lock would keep the app's statements, and its closing, waiting.
    unlock()
    await app.close()
    await database.drop()
  })
  const alice = await createAuthor(app, 'alice')
  await createMessages(app, alice.id, 3, (i) => ({ content: `held message ${i}` }))
  const base = await app.listen({ host: '127.0.0.1', port: 0 })
  const agent = new Agent({ localAddress: CLIENT })
  t.teardown(async () => { await agent.close() })

  const sessions = postgres(database.url, { max: 2, onnotice: () => {} })
  t.teardown(async () => { await sessions.end() })
  // The app's search statements (they call search_id_list), as PostgreSQL runs them now.
  const searching = async (): Promise<number> => (await sessions<Array<{ n: number }>>`select count(*)::int as n from pg_stat_activity
    where datname = current_database() and application_name = 'messages-api' and state = 'active' and query like '%search_id_list%'`)[0]!.n
  const until = async (done: () => Promise<boolean> | boolean, what: string): Promise<void> => {
    const deadline = performance.now() + NOT_HUNG_MS
    while (!await done()) {
      if (performance.now() > deadline) throw new Error(`not within ${NOT_HUNG_MS} ms: ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }

  let locked!: () => void
  const isLocked = new Promise<void>((resolve) => { locked = resolve })
  const holding = sessions.begin(async (tx) => {
    await tx`lock table messages in access exclusive mode`
    locked()
    await unlocked
  })
  await isLocked

  const before = heavyReadCounts()
  const search = (term: string) => {
    const leave = new AbortController()
    const answered = request(`${base}/v2/messages/search?q=${term}`, { dispatcher: agent, signal: leave.signal })
      .then(async (res) => { await res.body.dump(); return res.statusCode }, () => 'gone')
    return { leave: () => { leave.abort() }, answered }
  }
  const running = Array.from({ length: HEAVY_READS_PER_CLIENT }, (_, n) => search(`held${n}`))
  await until(async () => await searching() === HEAVY_READS_PER_CLIENT, `${HEAVY_READS_PER_CLIENT} search statements wait for the lock`)
  const waiting = search('waiting')
  await until(() => heavyReadCounts().waiting === before.waiting + 1, 'a third search from the same client waits for a place')

  waiting.leave()
  running[0]!.leave()
  // Gone, unless its bounded wait ended first on a slow machine (503): either way it never started.
  const waited = await waiting.answered
  t.ok(waited === 'gone' || waited === 503, `the waiting search is answered (${waited})`)
  t.equal(await running[0]!.answered, 'gone')
  await until(async () => await searching() === HEAVY_READS_PER_CLIENT - 1, 'the running statement of the client that left is cancelled, the lock still held')
  await until(() => heavyReadCounts().running === before.running + HEAVY_READS_PER_CLIENT - 1, 'its place is free')
  t.same({ waiting: heavyReadCounts().waiting - before.waiting, statements: await searching() }, { waiting: 0, statements: HEAVY_READS_PER_CLIENT - 1 },
    'the search that waited did not take the freed place: it never reached the database')
  const after = heavyReadCounts()
  t.same({ waiting: after.abandoned.waiting + after.shed.waited - before.abandoned.waiting - before.shed.waited, running: after.abandoned.running - before.abandoned.running },
    { waiting: 1, running: 1 }, 'the running one is counted as given up, the waiting one too (or as refused after its wait)')

  for (const other of running.slice(1)) other.leave()
  await until(async () => await searching() === 0, 'once every client has gone, the database runs none of their statements')
  unlock()
  await holding
  const res = await request(`${base}/v2/messages/search?q=held`, { dispatcher: agent })
  t.equal(res.statusCode, 200, 'searches go on afterwards')
  t.equal((await res.body.json() as { pagination: { total: number } }).pagination.total, 3)
  t.same(lines.filter((line) => line.level >= 50), [], 'and a client that left is no error of the server: no error line')
})
