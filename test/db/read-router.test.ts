import { createServer } from 'node:net'
import { sql } from 'drizzle-orm'
import t, { type Test } from 'tap'
import { ConfigError, loadConfig } from '../../src/config.js'
import { createDb, createReplica, type Database } from '../../src/db/client.js'
import { isUnreachable } from '../../src/db/driver-errors.js'
import { createReadRouter, primaryOnly, type ReadHandles } from '../../src/db/read-router.js'
import { HeavyReadsFullError } from '../../src/errors.js'

// The router on real databases: embedded PGlite instances stand for a primary and its replicas
// (each tagged with its own name), and a postgres:// replica on a closed loopback port refuses
// connections for real.

async function tagged (t: Test, name: string): Promise<Database> {
  const handle = await createDb({ url: 'memory://' })
  t.teardown(() => handle.close())
  await handle.db.execute(sql`create table whoami (name text)`)
  await handle.db.execute(sql`insert into whoami values (${name})`)
  return handle.db
}

async function whoami (db: Database): Promise<string> {
  const { rows } = await db.execute<{ name: string }>(sql`select name from whoami`) as unknown as { rows: Array<{ name: string }> }
  return rows[0]?.name ?? ''
}

async function closedPort (): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 1))
    })
  })
}

async function refusingReplica (t: Test): Promise<Database> {
  const replica = createReplica(`postgres://postgres@127.0.0.1:${await closedPort()}/none`)
  t.teardown(() => replica.close())
  return replica.db
}

/** A read as a repository makes one: on the handle picked, and once more on its fallback when it fails. */
function router (handles: ReadHandles) {
  return async <T>(read: (db: Database) => Promise<T>): Promise<T> => {
    const on = handles.pick()
    try {
      return await read(on.db)
    } catch (err) {
      return await read(on.fallback(err))
    }
  }
}

// Started once: each embedded database takes a moment to start.
const primary = await tagged(t, 'primary')
const a = await tagged(t, 'a')
const b = await tagged(t, 'b')
await primary.execute(sql`create table only_here (n int)`)
await primary.execute(sql`insert into only_here values (7)`)

t.test('without replicas every read runs on the primary', async (t) => {
  t.equal(await router(primaryOnly(primary))(whoami), 'primary')
  t.equal(await router(createReadRouter(primary, []))(whoami), 'primary')
})

t.test('replicas are read in turn', async (t) => {
  const read = router(createReadRouter(primary, [a, b]))
  const served: string[] = []
  for (let i = 0; i < 5; i++) served.push(await read(whoami))
  t.same(served, ['a', 'b', 'a', 'b', 'a'])
})

t.test('a replica that refuses connections is skipped for the back-off, then tried again', async (t) => {
  let clock = 1_000_000
  const events: Array<{ replica: number, down: boolean }> = []
  const dead = await refusingReplica(t)
  const read = router(createReadRouter(primary, [dead, b], {
    backoffMs: 5_000,
    now: () => clock,
    onReplicaError: ({ replica, down }) => events.push({ replica, down })
  }))
  let deadTried = 0
  const traced = async (db: Database) => {
    if (db === dead) deadTried++
    return whoami(db)
  }

  t.equal(await read(traced), 'primary', 'the refused read is served by the primary')
  t.same(events, [{ replica: 0, down: true }])
  t.equal(await read(traced), 'b')
  t.equal(await read(traced), 'b', 'the dead replica is left out while it is down')
  t.equal(deadTried, 1)

  clock += 5_001
  t.equal(await read(traced), 'primary', 'after the back-off it is tried again, and still falls back')
  t.equal(deadTried, 2)
  t.same(events, [{ replica: 0, down: true }, { replica: 0, down: true }])
})

t.test('with every replica down, reads go to the primary without trying them', async (t) => {
  const dead = await refusingReplica(t)
  let deadTried = 0
  const read = router(createReadRouter(primary, [dead]))
  const traced = async (db: Database) => {
    if (db === dead) deadTried++
    return whoami(db)
  }
  t.same([await read(traced), await read(traced), await read(traced)], ['primary', 'primary', 'primary'])
  t.equal(deadTried, 1)
})

t.test('a query error on a replica is read again on the primary, without marking the replica down', async (t) => {
  const events: Array<{ replica: number, down: boolean }> = []
  // The replica lacks a table the primary has, as a replica that lags behind a migration would.
  const read = router(createReadRouter(primary, [a], { onReplicaError: ({ replica, down }) => events.push({ replica, down }) }))
  const count = async (db: Database) => {
    const { rows } = await db.execute(sql`select n from only_here`) as unknown as { rows: Array<{ n: number }> }
    return rows[0]?.n
  }
  t.equal(await read(count), 7)
  t.same(events, [{ replica: 0, down: false }])
  t.equal(await read(whoami), 'a', 'the replica still serves the next read')
})

t.test('a failure on the primary reaches the caller', async (t) => {
  const read = router(createReadRouter(primary, [await refusingReplica(t)]))
  await t.rejects(read(async (db) => db.execute(sql`select * from no_such_table`)))
})

t.test('isUnreachable: connection failures, also when wrapped, but not query errors', async (t) => {
  t.ok(isUnreachable(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' })))
  t.ok(isUnreachable(new Error('query failed', { cause: Object.assign(new Error('terminating'), { code: '57P01' }) })))
  t.ok(isUnreachable({ code: '08006' }))
  t.notOk(isUnreachable(Object.assign(new Error('no table'), { code: '42P01' })))
  t.notOk(isUnreachable(new Error('plain')))
  t.notOk(isUnreachable(undefined))
})

t.test('DATABASE_READ_URLS (CONTRACT 11)', async (t) => {
  const primary = 'postgres://u@db:5432/app'
  t.same(loadConfig({ DATABASE_URL: primary }).databaseReadUrls, [], 'unset: no replica')
  t.same(loadConfig({ DATABASE_URL: primary, DATABASE_READ_URLS: 'postgres://u@r1:5432/app, postgresql://u@r2/app' }).databaseReadUrls,
    ['postgres://u@r1:5432/app', 'postgresql://u@r2/app'], 'a comma-separated list, spaces ignored')

  const fails = (env: Record<string, string>, expected: string) => {
    t.throws(() => loadConfig(env), new ConfigError(expected), expected)
  }
  fails({ DATABASE_URL: primary, DATABASE_READ_URLS: 'mysql://r1/app' },
    'Invalid DATABASE_READ_URLS: must be a comma-separated list of postgres:// URLs (got "mysql://r1/app")')
  fails({ DATABASE_URL: primary, DATABASE_READ_URLS: 'postgres://r1/app,,postgres://r2/app' },
    'Invalid DATABASE_READ_URLS: must be a comma-separated list of postgres:// URLs (got "postgres://r1/app,,postgres://r2/app")')
  fails({ DATABASE_URL: 'memory://', DATABASE_READ_URLS: 'postgres://r1/app' },
    'DATABASE_READ_URLS needs DATABASE_URL to be a postgres:// URL (replicas follow a PostgreSQL primary)')
  fails({ DATABASE_READ_URLS: 'postgres://r1/app' },
    'DATABASE_READ_URLS needs DATABASE_URL to be a postgres:// URL (replicas follow a PostgreSQL primary)')
})

t.test('an answer of the service\'s own on a replica is the read\'s outcome: no fallback to the primary', async (t) => {
  const events: unknown[] = []
  const read = router(createReadRouter(primary, [a], { onReplicaError: (event) => events.push(event) }))
  const ran: string[] = []
  const outcome = await read(async (db) => {
    ran.push(await whoami(db))
    throw new HeavyReadsFullError()
  }).catch((err: unknown) => err)
  t.ok(outcome instanceof HeavyReadsFullError, 'the 503 of expensive reads comes through')
  t.same(ran, ['a'], 'and the read ran on the replica alone')
  t.same(events, [], 'with no replica failure reported')
})
