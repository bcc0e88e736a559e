// db: the database handles (the primary, and read replicas behind the read router), the migrations,
// readiness, and the counters' own upkeep. Each capability's plugin builds its repository on them.
import { sql } from 'drizzle-orm'
import fp from 'fastify-plugin'
import { createDb, createReplica, PRIMARY_PROBE_MS, type Database, type DbOptions } from '../src/db/client.js'
import type { HistorySource } from '../src/db/failover/elector.js'
import { ReplicaTimelines } from '../src/db/failover/replica-timelines.js'
import { createReadRouter, type ReadHandles } from '../src/db/read-router.js'
import { every } from '../src/db/upkeep.js'
import { DatabaseUnavailableError } from '../src/errors.js'

declare module 'fastify' {
  interface FastifyInstance {
    db: Database
    /** Picks the database of a read: a replica in turn, or the primary (CONTRACT 11); writes use `db`. */
    readDb: ReadHandles
    /** Resolves when the database answers a trivial query; else DatabaseUnavailableError (503). */
    pingDatabase: () => Promise<void>
    /** The history of the database followed (CONTRACT 14): its timeline, and when it changes. */
    databaseHistory: HistorySource
  }
}

const COMPACT_EVERY_MS = 30_000

export interface DbPluginOptions extends DbOptions {
  /** Apply pending migrations before the app accepts requests (default true). */
  migrate?: boolean
  /** postgres:// URLs of streaming replicas (DATABASE_READ_URLS). */
  readUrls?: readonly string[]
}

export default fp<DbPluginOptions>(async function db (app, opts) {
  const handle = await createDb({ ...opts, log: app.log })
  if (opts.migrate !== false) {
    try {
      await handle.migrate()
    } catch (err) {
      await handle.close()
      throw err
    }
  }
  app.addHook('onClose', async () => { await handle.close() })
  app.log.debug({ driver: handle.driver }, 'database ready')

  // The counters' writer slots are folded together now and then; exactness never depends on it, only
  // the length of the sums readers add up, and whether a located page reads its counts from the index
  // alone (drizzle/0019: only folded counts are in one).
  const stopCompaction = every(COMPACT_EVERY_MS, async () => handle.db.execute(sql`select pagination_compact()`), app.log, 'counter compaction failed')
  app.addHook('onClose', async () => { stopCompaction() })

  app.decorate('db', handle.db)
  app.decorate('databaseHistory', handle.history)
  app.decorate('pingDatabase', async () => {
    try {
      await handle.db.execute(sql`select 1`)
    } catch (err) {
      // A real outage: one error line, whose err carries the driver's error as its cause.
      throw new DatabaseUnavailableError({ cause: err })
    }
  })

  // Replicas are only read: never migrated, and readiness does not depend on them, since a read
  // they cannot serve goes to the primary.
  const readUrls = opts.readUrls ?? []
  const replicas = readUrls.map((url) => createReplica(url, { poolSize: opts.poolSize, statementTimeoutMs: opts.statementTimeoutMs, traced: opts.traced }))
  app.addHook('onClose', async () => { await Promise.all(replicas.map(async (replica) => replica.close())) })
  // A replica is read only while it is on the primary's timeline (CONTRACT 14).
  const timelines = new ReplicaTimelines(readUrls, handle.history, PRIMARY_PROBE_MS)
  if (readUrls.length > 0) await timelines.start()
  app.addHook('onClose', async () => { await timelines.close() })
  app.decorate('readDb', createReadRouter(handle.db, replicas.map((replica) => replica.db), {
    usable: timelines.usable,
    onReplicaError ({ replica, down, err }) {
      const message = err instanceof Error ? err.message : String(err)
      app.log.warn({ replica, down, err: { message } }, down ? 'read replica unreachable; reading from the primary' : 'read failed on a replica; read again on the primary')
    }
  }))
}, { name: 'db', fastify: '5.x' })
