// db: the Drizzle handles (primary and read replicas), the repositories built on them, and the readiness probe.
import { sql } from 'drizzle-orm'
import fp from 'fastify-plugin'
import { createDb, createReplica, PRIMARY_PROBE_MS, type Database, type DbOptions } from '../src/db/client.js'
import type { HistorySource } from '../src/db/failover/elector.js'
import { ReplicaTimelines } from '../src/db/failover/replica-timelines.js'
import { createReadRouter, type ReadRouter } from '../src/db/read-router.js'
import { createIdempotencyRepository, type IdempotencyRepository } from '../src/idempotency/repository.js'
import { createMessageChangesRepository, type MessageChangesRepository } from '../src/sync/changes.js'
import { createMessagesRepository, type MessagesRepository } from '../src/messages/repository.js'
import { mergePendingLists, MERGE_PENDING_LISTS_EVERY_MS } from '../src/search/pending-lists.js'
import { createMoviesRepository, type MoviesRepository } from '../src/movies/repository.js'
import { createUsersRepository, type UsersRepository } from '../src/users/repository.js'

declare module 'fastify' {
  interface FastifyInstance {
    db: Database
    /** Runs a read on a replica in turn, or on the primary (CONTRACT 11); writes use `db`. */
    readDb: ReadRouter
    messagesRepository: MessagesRepository
    moviesRepository: MoviesRepository
    usersRepository: UsersRepository
    idempotencyRepository: IdempotencyRepository
    /** Delta sync (CONTRACT 12): GET /v2/messages/changes. */
    messageChanges: MessageChangesRepository
    /** Resolves when the database answers a trivial query. */
    pingDatabase: () => Promise<void>
    /** The history of the database followed (CONTRACT 14): its timeline, and when it changes. */
    databaseHistory: HistorySource
  }
}

const COMPACT_EVERY_MS = 30_000
const PRUNE_KEYS_EVERY_MS = 60_000
const PRUNE_CHANGES_EVERY_MS = 60_000

export interface DbPluginOptions extends DbOptions {
  /** Apply pending migrations before the app accepts requests (default true). */
  migrate?: boolean
  /** postgres:// URLs of streaming replicas (DATABASE_READ_URLS). */
  readUrls?: readonly string[]
  /** IDEMPOTENCY_TTL_HOURS (default 24). */
  idempotencyTtlHours?: number
  /** SYNC_RETENTION_HOURS (default 720). */
  syncRetentionHours?: number
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

  // Upkeep on the primary, now and then, until the app closes; a failure is logged and tried again next time.
  function every (ms: number, task: () => Promise<unknown>, failure: string): void {
    const timer = setInterval(() => {
      task().catch((err: Error) => app.log.warn({ err: { message: err.message } }, failure))
    }, ms).unref()
    app.addHook('onClose', async () => { clearInterval(timer) })
  }
  // The counters' writer slots are folded together now and then; exactness never depends on it, only
  // the length of the sums readers add up.
  every(COMPACT_EVERY_MS, async () => handle.db.execute(sql`select pagination_compact()`), 'counter compaction failed')
  // New messages wait in the search indexes' pending lists; merged here, no create pays for a merge.
  every(MERGE_PENDING_LISTS_EVERY_MS, async () => mergePendingLists(handle.db), 'search index pending-list merge failed')

  app.decorate('db', handle.db)
  app.decorate('databaseHistory', handle.history)

  // Replicas are only read: never migrated, and readiness does not depend on them, since a read
  // they cannot serve goes to the primary.
  const readUrls = opts.readUrls ?? []
  const replicas = readUrls.map((url) => createReplica(url, { poolSize: opts.poolSize, statementTimeoutMs: opts.statementTimeoutMs }))
  app.addHook('onClose', async () => { await Promise.all(replicas.map(async (replica) => replica.close())) })
  // A replica is read only while it is on the primary's timeline (CONTRACT 14).
  const timelines = new ReplicaTimelines(readUrls, handle.history, PRIMARY_PROBE_MS)
  if (readUrls.length > 0) await timelines.start()
  app.addHook('onClose', async () => { await timelines.close() })
  const read = createReadRouter(handle.db, replicas.map((replica) => replica.db), {
    usable: timelines.usable,
    onReplicaError ({ replica, down, err }) {
      const message = err instanceof Error ? err.message : String(err)
      app.log.warn({ replica, down, err: { message } }, down ? 'read replica unreachable; reading from the primary' : 'read failed on a replica; read again on the primary')
    }
  })

  app.decorate('readDb', read)
  const idempotencyTtlHours = opts.idempotencyTtlHours ?? 24
  const idempotency = createIdempotencyRepository(handle.db, { ttlHours: idempotencyTtlHours })
  // Expired keys already count as absent; deleting them only keeps the table small. Primary only.
  every(PRUNE_KEYS_EVERY_MS, idempotency.prune, 'idempotency key pruning failed')

  // The change log keeps SYNC_RETENTION_HOURS; older entries (and the tokens that need them) expire.
  const messageChanges = createMessageChangesRepository(handle.db, read, { retentionHours: opts.syncRetentionHours ?? 720, history: handle.history })
  every(PRUNE_CHANGES_EVERY_MS, messageChanges.prune, 'change log pruning failed')
  app.decorate('messageChanges', messageChanges)

  app.decorate('messagesRepository', createMessagesRepository(handle.db, read, { idempotencyTtlHours }))
  app.decorate('idempotencyRepository', idempotency)
  app.decorate('moviesRepository', createMoviesRepository(handle.db, read))
  app.decorate('usersRepository', createUsersRepository(handle.db, read))
  app.decorate('pingDatabase', async () => { await handle.db.execute(sql`select 1`) })
}, { name: 'db', fastify: '5.x' })
