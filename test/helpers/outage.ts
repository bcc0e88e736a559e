import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import type { Test } from 'tap'
import type { App } from '../../src/app.js'
import { queryRows } from './fixtures.js'

export interface Outage {
  /** From now on every statement of the app fails, `select 1` included. */
  begin: () => Promise<void>
  /** The database answers again, without restarting the app. */
  end: () => Promise<void>
}

/**
 * A database outage for an app, on either database:
 * - PostgreSQL: the database refuses new connections (ALLOW_CONNECTIONS false) and the app's
 *   existing connections are terminated from an admin connection, as in an outage;
 * - PGlite (embedded, one connection, nothing to cut): the session is left in an aborted
 *   transaction, where the server rejects every statement until ROLLBACK.
 */
export async function databaseOutage (t: Test, app: App): Promise<Outage> {
  const server = process.env.TEST_DATABASE_URL
  if (server === undefined || server === '') {
    return {
      async begin () {
        await app.db.execute(sql`begin`)
        await t.rejects(app.db.execute(sql`select 1 / 0`), 'PGlite: a failing statement aborts the open transaction')
      },
      async end () { await app.db.execute(sql`rollback`) }
    }
  }
  const [{ name } = { name: '' }] = await queryRows<{ name: string }>(app.db, sql`select current_database() as name`)
  const admin = postgres(server, { max: 1, onnotice: () => {} })
  t.teardown(async () => { await admin.end() })
  return {
    async begin () {
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
    },
    async end () {
      await admin.unsafe(`alter database "${name}" with allow_connections true`)
    }
  }
}
