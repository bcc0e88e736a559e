import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { createDb, type DbHandle } from '../../src/db/client.js'
import { statement } from '../../src/db/statement.js'
import { bounded, NOT_HUNG_MS } from '../helpers/bounded.js'
import { freshDatabase, onPostgresServer } from '../helpers/database.js'
import { queryRows } from '../helpers/fixtures.js'

// A statement run with a signal (src/db/statement.ts) is not started once the signal has aborted, and
// is cancelled on the server when it aborts while it runs (CONTRACT 16: a read whose client has gone).

const nextId = statement<{ id: string }>('test_next_message_id', sql`select nextval('messages_id_seq')::text as id`)
const sleeping = statement<{ slept: string }>('test_sleep', sql`select pg_sleep(600)::text as slept`)

async function open (t: Test, poolSize?: number): Promise<{ handle: DbHandle, url: string }> {
  const database = await freshDatabase()
  const handle = await createDb({ url: database.dataDir === undefined ? database.url : undefined, dataDir: database.dataDir, poolSize, statementTimeoutMs: 0 })
  t.teardown(async () => {
    await handle.close()
    await database.drop()
  })
  await handle.migrate()
  return { handle, url: database.url }
}

const lastId = async (handle: DbHandle): Promise<string> =>
  (await queryRows<{ id: string }>(handle.db, sql`select last_value::text as id from messages_id_seq`))[0]!.id

t.test('a statement whose signal has aborted is never sent', async (t) => {
  const { handle } = await open(t)
  const before = await lastId(handle)
  const gone = new AbortController()
  gone.abort()
  await t.rejects(nextId(handle.db, {}, gone.signal), { name: 'AbortError' })
  await t.rejects(handle.db.transaction(async (tx) => await nextId(tx as unknown as typeof handle.db, {}, gone.signal)), { name: 'AbortError' }, 'nor in a transaction')
  t.equal(await lastId(handle), before, 'the sequence did not move')
  const [row] = await nextId(handle.db, {}, new AbortController().signal)
  t.equal(row!.id, await lastId(handle), 'a statement with a signal that does not abort runs as any other')
})

t.test('on PostgreSQL, a running statement is cancelled when its signal aborts', async (t) => {
  await onPostgresServer(t)
  const { handle, url } = await open(t, 2)
  const watcher = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(async () => { await watcher.end() })
  const sleepers = async (): Promise<number> =>
    (await watcher<Array<{ n: number }>>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event = 'PgSleep'`)[0]!.n
  const until = async (n: number, what: string): Promise<void> => {
    const deadline = performance.now() + NOT_HUNG_MS
    while (await sleepers() !== n) {
      if (performance.now() > deadline) throw new Error(`not within ${NOT_HUNG_MS} ms: ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }

  for (const where of ['outside a transaction', 'in a transaction'] as const) {
    const stop = new AbortController()
    const running = where === 'outside a transaction'
      ? sleeping(handle.db, {}, stop.signal)
      : handle.db.transaction(async (tx) => await sleeping(tx as unknown as typeof handle.db, {}, stop.signal))
    running.catch(() => {})
    await until(1, `the statement runs (${where})`)
    stop.abort()
    await t.rejects(bounded(running, NOT_HUNG_MS), { code: '57014' }, `${where}: it fails as cancelled`)
    await until(0, `the statement is gone (${where})`)
    t.same(await queryRows(handle.db, sql`select 1 as one`), [{ one: 1 }], `${where}: the pool goes on`)
  }
})

t.test('on PostgreSQL, a statement cancelled before a connection was open for it costs the pool nothing', async (t) => {
  await onPostgresServer(t)
  // Nothing has run on the pool yet (the migrations have a connection of their own): the statement
  // opens its one connection, and is its first.
  const { handle: fresh } = await open(t, 1)
  const stop = new AbortController()
  const first = sleeping(fresh.db, {}, stop.signal)
  first.catch(() => {})
  await new Promise((resolve) => setImmediate(resolve))
  stop.abort()
  await t.rejects(bounded(first, NOT_HUNG_MS), { code: '57014' }, 'it is cancelled once sent')
  t.same(await bounded(queryRows(fresh.db, sql`select 1 as one`), NOT_HUNG_MS), [{ one: 1 }], 'and the pool\'s one connection serves the next statement')
})
