import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import t from 'tap'
import type { App } from '../src/app.js'
import { build } from './helpers/build.js'
import { queryRows } from './helpers/fixtures.js'

async function get (app: App, url: string) {
  const res = await app.inject({ method: 'GET', url })
  return { status: res.statusCode, body: res.json() }
}

const UNAVAILABLE = { status: 503, body: { error: 'Database unavailable' } }
const OK = { status: 200, body: { ok: true } }

t.test('GET /health and GET /health/ready', async (t) => {
  const app = await build(t)
  t.same(await get(app, '/health'), OK, 'SPEC 4.2: GET /health is 200 { ok: true }')
  t.same(await get(app, '/health/ready'), OK, 'CONTRACT 10: GET /health/ready is 200 { ok: true } when the database answers')
  const res = await app.inject({ method: 'GET', url: '/health' })
  t.same(Object.keys(res.json()), ['ok'], '/health has the one member ok')
})

// The database really stops answering; nothing is mocked. How depends on the driver:
// - PostgreSQL: the database refuses new connections (ALLOW_CONNECTIONS false) and the app's
//   existing connections are terminated from an admin connection, as in an outage;
// - PGlite (in process, one connection, nothing to cut): the session is left in an aborted
//   transaction, where the server rejects every statement, `select 1` included, until ROLLBACK.
t.test('GET /health/ready is 503 while the database does not answer, and recovers', async (t) => {
  const app = await build(t)
  t.same(await get(app, '/health/ready'), OK, 'ready before the outage')

  const server = process.env.TEST_DATABASE_URL
  let outage: () => Promise<void>
  let recover: () => Promise<void>
  if (server !== undefined && server !== '') {
    const [{ name } = { name: '' }] = await queryRows<{ name: string }>(app.db, sql`select current_database() as name`)
    const admin = postgres(server, { max: 1, onnotice: () => {} })
    t.teardown(async () => { await admin.end() })
    outage = async () => {
      await admin.unsafe(`alter database "${name}" with allow_connections false`)
      const pids = (await admin<Array<{ pid: number }>>`select pid from pg_stat_activity where datname = ${name}`).map((r) => r.pid)
      await admin`select pg_terminate_backend(pid) from unnest(${pids}::int[]) as pid`
      // pg_terminate_backend only signals: wait until the backends are gone, so the outage is real
      // before the first probe.
      for (let i = 0; i < 100; i++) {
        const [left] = await admin<Array<{ n: number }>>`select count(*)::int as n from pg_stat_activity where pid = any(${pids}::int[])`
        if (left?.n === 0) break
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      t.ok(pids.length >= 1, 'PostgreSQL: the app had connections, now terminated')
    }
    recover = async () => {
      await admin.unsafe(`alter database "${name}" with allow_connections true`)
    }
  } else {
    outage = async () => {
      await app.db.execute(sql`begin`)
      await t.rejects(app.db.execute(sql`select 1 / 0`), 'PGlite: a failing statement aborts the open transaction')
    }
    recover = async () => {
      await app.db.execute(sql`rollback`)
    }
  }

  await outage()
  // After a terminate the pool may need a request to notice; every answer must still be 503.
  for (let i = 1; i <= 3; i++) {
    t.same(await get(app, '/health/ready'), UNAVAILABLE, `during the outage (${i}): 503 { error: "Database unavailable" }`)
  }
  t.same(await get(app, '/health'), OK, 'liveness does not touch the database: /health stays 200')

  await recover()
  t.same(await get(app, '/health/ready'), OK, 'after the outage: ready again, without a restart')
})
