// The embedded database runs in a thread of its own (src/db/pglite-thread.ts): a slow query must not
// stall HTTP, and drizzle, transactions, errors, COPY and shutdown must behave as PGlite in process did.
import { sql } from 'drizzle-orm'
import t from 'tap'
import { buildApp } from '../../src/app.js'
import { createDb } from '../../src/db/client.js'
import { PgliteThread } from '../../src/db/pglite-thread.js'
import { testConfig } from '../helpers/build.js'
import { queryRows } from '../helpers/fixtures.js'

// Half a second or more of PGlite's CPU on this kind of machine; only its order against other events matters.
const SLOW_QUERY = 'select count(*)::int as n from generate_series(1, 2000000)'

t.test('a slow query on the embedded database does not stall HTTP', async (t) => {
  const app = await buildApp(testConfig({ databaseUrl: 'memory://' }), { logger: false })
  t.teardown(async () => { await app.close() })
  const origin = await app.listen({ host: '127.0.0.1', port: 0 })

  const events: string[] = []
  const slow = queryRows<{ n: number }>(app.db, sql.raw(SLOW_QUERY)).then((rows) => { events.push('slow query'); return rows })
  // In process, the query would hold the event loop: the timer and the request could only run after it.
  await new Promise<void>((resolve) => setTimeout(resolve, 20))
  events.push('timer')
  const res = await fetch(`${origin}/health`)
  events.push('health')
  t.equal(res.status, 200)
  t.same(await res.json(), { ok: true })
  t.same(await slow, [{ n: 2_000_000 }], 'the slow query still completes, exactly')
  t.same(events, ['timer', 'health', 'slow query'], 'a timer and a /health request were both served while the query ran')
})

t.test('transactions: other queries wait for them, a rollback leaves nothing, errors keep their fields', async (t) => {
  const handle = await createDb({ url: 'memory://' })
  t.teardown(async () => { await handle.close() })
  await handle.db.execute(sql`create table t (id int primary key, note text)`)

  const order: string[] = []
  let release!: () => void
  const held = new Promise<void>((resolve) => { release = resolve })
  let wrote!: () => void
  const written = new Promise<void>((resolve) => { wrote = resolve })
  const tx = handle.db.transaction(async (tx) => {
    await tx.execute(sql`insert into t values (1, 'in the transaction')`)
    order.push('tx wrote')
    wrote()
    await held
    order.push('tx commits')
  })
  // The read outside is sent once the transaction has written, not after a guess of how long that
  // takes; then it has a moment in which it would run if it did not wait.
  await Promise.race([written, tx])
  const outside = queryRows<{ n: number }>(handle.db, sql`select count(*)::int as n from t`).then((rows) => { order.push('outside read'); return rows })
  await new Promise<void>((resolve) => setTimeout(resolve, 20))
  release()
  await tx
  t.same(await outside, [{ n: 1 }], 'the read outside ran after the commit and saw its row')
  t.same(order, ['tx wrote', 'tx commits', 'outside read'])

  const failed = handle.db.transaction(async (tx) => {
    await tx.execute(sql`insert into t values (2, 'rolled back')`)
    await tx.execute(sql`insert into t values (1, 'duplicate')`)
  })
  const err = await failed.then(() => undefined, (err: unknown) => err as Error & { cause?: Record<string, unknown> })
  t.ok(err, 'a unique violation fails the transaction')
  t.match(err?.cause, { code: '23505', constraint: 't_pkey', table: 't' }, 'SQLSTATE, constraint and table cross the thread')
  t.notOk(err?.cause !== undefined && 'query' in err.cause, 'the failed query text is not copied into the error')
  t.same(await queryRows(handle.db, sql`select id, note from t order by id`), [{ id: 1, note: 'in the transaction' }], 'the rolled-back row is gone')

  await handle.db.transaction(async (tx) => {
    await tx.execute(sql`insert into t values (3, 'kept')`)
    await tx.transaction(async (inner) => {
      await inner.execute(sql`insert into t values (4, 'savepoint')`)
      inner.rollback()
    }).catch(() => {})
  })
  t.same(await queryRows(handle.db, sql`select id from t order by id`), [{ id: 1 }, { id: 3 }], 'a nested rollback undoes only its savepoint')
})

t.test('drizzle reads dates as text, COPY from a blob, then close', async (t) => {
  const thread = await PgliteThread.create({ dataDir: undefined })
  const typed = await thread.query<{ at: string, n: number }>("select '2024-02-29 12:00:00+00'::timestamptz as at, 1 as n", [], {
    parsers: { 1184: (value: string) => value }
  })
  t.same(typed.rows, [{ at: '2024-02-29 12:00:00+00', n: 1 }], 'a parser that keeps the text is applied in the thread')
  await t.rejects(thread.query('select 1', [], { parsers: { 23: (value: string) => Number(value) * 2 } }),
    /only parsers that keep the text \(type 23\)/, 'a parser that would change the value is refused, not dropped')

  await thread.exec('create table c (id int, word text)')
  await thread.query("COPY c FROM '/dev/blob'", [], { blob: new Blob(['1\tone\n2\ttwo\n']) })
  t.same((await thread.query('select * from c order by id')).rows, [{ id: 1, word: 'one' }, { id: 2, word: 'two' }], 'COPY FROM a blob loads the rows')
  const copied = await thread.query('COPY c TO \'/dev/blob\'')
  t.equal(await copied.blob?.text(), '1\tone\n2\ttwo\n', 'COPY TO a blob hands the blob back')

  await thread.close()
  await t.rejects(thread.query('select 1'), /the PGlite thread is closed/, 'a query after close fails at once')
  await thread.close()
  t.pass('closing twice is harmless')
})

t.test('a data directory survives close and reopen through the thread', async (t) => {
  const dataDir = t.testdir()
  const first = await createDb({ url: undefined, dataDir })
  await first.db.execute(sql`create table kept (v text)`)
  await first.db.execute(sql`insert into kept values ('written before close')`)
  await first.close()
  const second = await createDb({ url: undefined, dataDir })
  t.teardown(async () => { await second.close() })
  t.same(await queryRows(second.db, sql`select v from kept`), [{ v: 'written before close' }])
})

t.test('a thread that dies fails what waits and what follows, and says so once', async (t) => {
  const failures: Error[] = []
  // A small heap, and a result far larger than it: the thread runs out of memory building the rows.
  const thread = await PgliteThread.create({ dataDir: undefined }, { resourceLimits: { maxOldGenerationSizeMb: 48 }, onFailure: (err) => { failures.push(err) } })
  t.teardown(async () => { await thread.close() })
  t.same((await thread.query('select 1 as x')).rows, [{ x: 1 }], 'it answers before')
  await t.rejects(thread.query('select repeat(md5(i::text), 20000) as s from generate_series(1, 400) i'),
    { code: 'ERR_WORKER_OUT_OF_MEMORY' }, 'the query that was running fails with why')
  await t.rejects(thread.query('select 1'), { code: 'ERR_WORKER_OUT_OF_MEMORY' }, 'so does every later query, at once')
  t.equal(failures.length, 1, 'onFailure is called once (the error and the exit are one failure)')
  t.match(failures[0], { code: 'ERR_WORKER_OUT_OF_MEMORY' })
})
