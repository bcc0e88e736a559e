import { mkdir } from 'node:fs/promises'
import type { Socket } from 'node:net'
import { fileURLToPath } from 'node:url'
import type { PGlite } from '@electric-sql/pglite'
import { sql } from 'drizzle-orm'
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'
import { isSessionEnded } from './driver-errors.js'
import { PrimaryElector, type HistorySource } from './failover/elector.js'
import { parseHosts } from './failover/hosts.js'
import { PgliteThread } from './pglite-thread.js'
import * as schema from './schema.js'
import { traceStatement, tracedPglite, type StatementServer } from './statement-spans.js'

/** The one database handle the rest of the code sees, whichever driver is behind it. */
export type Database = PgDatabase<PgQueryResultHKT, typeof schema>

export interface DbHandle {
  db: Database
  driver: 'postgres' | 'pglite'
  /** Applies the migrations in drizzle/ under an advisory lock, so concurrent start-ups do not race. */
  migrate: () => Promise<void>
  /** Which history of the database the service follows (CONTRACT 14). */
  history: HistorySource
  close: () => Promise<void>
}

export interface DbOptions {
  /** postgres://, postgresql://, memory://, or undefined for PGlite persisted in dataDir. */
  url: string | undefined
  dataDir?: string
  poolSize?: number
  statementTimeoutMs?: number
  /** How often every host of DATABASE_URL is probed for the primary (default 1 s). */
  primaryProbeMs?: number
  /** Where the primary election reports what it does. */
  log?: ElectionLog
  /**
   * Give every statement a span when the work it runs for is traced (CONTRACT 15). Set only when
   * tracing is on: off, statements go to the driver with nothing in between.
   */
  traced?: boolean
}

type ElectionLog = ConstructorParameters<typeof PrimaryElector>[1]['log']
const SILENT: ElectionLog = { warn: () => {}, error: () => {} }
export const PRIMARY_PROBE_MS = 1_000
/** How long a connection to the primary may take, TCP connect (the elector's) and startup (the driver's) each. */
const PRIMARY_CONNECT_TIMEOUT_S = 10

/** A read replica: queries only, never migrated (it follows the primary's WAL). */
export interface ReplicaHandle {
  db: Database
  close: () => Promise<void>
}

export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url))
export const DEFAULT_DATA_DIR = '.data/pglite'

// Any constant works as long as every instance agrees on it.
const MIGRATION_LOCK_KEY = 7_300_452_031

/**
 * Seconds before a pool connection that failed is opened again. postgres.js grows this delay up to
 * 20 s while the server is down, and a query queued on that connection waits the whole delay: requests
 * would hang through an outage and for up to 20 s after the server is back. Capped at 1 s (with the
 * same jitter), a request during an outage fails within about a second and the pool is whole again
 * about a second after the server returns.
 */
export const reconnectDelaySeconds = (retries: number): number => (0.5 + Math.random() / 2) * Math.min(3 ** retries / 100, 1)

/** A query of the postgres driver as the service runs it: awaited, or read as values or raw bytes, and cancellable. */
export interface CancellableQuery<T = unknown> extends PromiseLike<T> {
  cancel: () => void
}

// What postgres.js 3.4 keeps on a query, read by cancelQuery: the backend it was sent to (null until
// then) and the function that sends its CancelRequest.
interface QueryInternals {
  state?: unknown
  canceller?: ((query: unknown) => Promise<unknown>) | null
}

/** How often a query cancelled before it was sent looks again whether it has been. */
const UNSENT_CANCEL_MS = 5
/** How long a cancelled statement may go on before its CancelRequest is sent again. */
const CANCEL_AGAIN_MS = 200

/**
 * Stops a query of the postgres driver: one running gets a CancelRequest, sent on a connection of its
 * own (not one of the pool), and fails with 57014. PostgreSQL ignores a CancelRequest that finds the
 * backend still reading its command, so one that overtook the statement it was for is sent again
 * while that statement goes on. Two things of postgres.js 3.4 are worked around. Its cancel() drops
 * the promise of the CancelRequest, which rejects when the server cannot be reached (a failover): with
 * nothing to catch it the process would stop, so it is caught here. And a query not yet sent that
 * opens a new connection of the pool is never sent once cancelled, but that connection is then never
 * released either: a query not yet sent is cancelled once it has been, which is at once for a
 * statement of a transaction (its connection is held) and as soon as the pool has a connection for it
 * otherwise. `settled` tells when the query has ended and needs nothing more.
 */
export function cancelQuery (query: { cancel: () => unknown }, settled: () => boolean = () => false): void {
  const internals = query as QueryInternals
  if (!('canceller' in internals)) {
    // Not the driver's own query: the wrapper of retryStaleSessionErrors, which cancels its own.
    query.cancel()
    return
  }
  const canceller = internals.canceller
  if (typeof canceller !== 'function') return
  // Taken, so that the driver's own cancel() does nothing more.
  internals.canceller = null
  const send = (): void => {
    if (settled()) return
    const sent = internals.state !== null && internals.state !== undefined
    if (sent) canceller(query).catch(() => {})
    setTimeout(send, sent ? CANCEL_AGAIN_MS : UNSENT_CANCEL_MS).unref()
  }
  send()
}

/**
 * postgres.js 3.4 keeps the FATAL error of a session that ended while a query was in flight, and
 * rejects the first query on that connection after it reconnects with it, although that query was
 * never sent (see porsager/postgres#1223). Every connection that was busy when the server restarted or
 * killed it would fail one more request after recovery. A query rejected with a session-ended error
 * was never run by a live session, so it is sent once more; other failures (a query that was running
 * when its connection was cut gets CONNECTION_CLOSED) are passed on unchanged. Transactions (`begin`)
 * are not wrapped. Each statement, its retry included, is one span when the work it runs for is
 * traced (statement-spans.ts). A query is cancelled with its `cancel` (cancelQuery), which also keeps
 * a retry from being sent.
 */
function retryStaleSessionErrors (client: postgres.Sql, server: StatementServer | undefined): postgres.Sql {
  type Query = ReturnType<postgres.Sql['unsafe']>
  return new Proxy(client, {
    get (target, property, receiver) {
      if (property !== 'unsafe') return Reflect.get(target, property, receiver)
      // drizzle awaits the query itself or its .values(), rawStatement its .raw(). A postgres.js query
      // starts only when awaited, so this one does too, and every way of reading it is retried alike.
      return (...args: Parameters<postgres.Sql['unsafe']>) => {
        let started: Query | undefined
        let cancelled = false
        let settled = false
        const start = (): Query => (started = target.unsafe(...args))
        const once = <T>(finish: (query: Query) => Promise<T>): Promise<T> =>
          finish(start()).catch((err: unknown) => {
            if (isSessionEnded(err) && !cancelled) return finish(start())
            throw err
          }).finally(() => { settled = true })
        const traced = <T>(finish: (query: Query) => Promise<T>): Promise<T> =>
          server === undefined ? once(finish) : traceStatement(args[0], server, () => once(finish))
        let rows: Promise<unknown> | undefined
        const query: CancellableQuery & { values: () => Promise<unknown>, raw: () => Promise<unknown> } = {
          then (resolve, reject) {
            rows ??= traced(async (running) => await running)
            return rows.then(resolve, reject)
          },
          values: () => traced(async (running) => await running.values()),
          raw: () => traced(async (running) => await running.raw()),
          cancel () {
            cancelled = true
            if (started !== undefined) cancelQuery(started, () => settled)
          }
        }
        return query as unknown as Query
      }
    }
  })
}

interface PoolOptions {
  max: number
  connectTimeoutSeconds: number
  applicationName: string
  statementTimeoutMs: number | undefined
  /** The primary's pool: connections open where the election says, and must be read-write. */
  elector?: PrimaryElector
  /** Statement spans (DbOptions.traced). */
  traced?: boolean
}

/** What a statement span says of the server a pool's statements run on. */
function serverOf (url: string, role: StatementServer['role']): StatementServer {
  const database = URL.canParse(url) ? decodeURIComponent(new URL(url).pathname.slice(1)) : ''
  return database === '' ? { role } : { role, database }
}

/** postgres.js's documented "custom socket" option, which its type declarations leave out. */
type DriverOptions = postgres.Options<Record<string, postgres.PostgresType>> & { socket?: () => Promise<Socket> }
const driver = (url: string, options: DriverOptions): postgres.Sql => postgres(url, options)

/** One pool of the postgres driver, primary or replica alike: the same reconnect and stale-error rules. */
function postgresPool (url: string, options: PoolOptions): postgres.Sql {
  const primary = options.elector === undefined
    ? {}
    // 'primary', not 'read-write': postgres.js 3.4 judges read-write by default_transaction_read_only
    // alone, which a hot standby of PostgreSQL 14 and later reports as off.
    : { socket: options.elector.socket, target_session_attrs: 'primary' as const }
  return retryStaleSessionErrors(driver(url, {
    max: options.max,
    idle_timeout: 30,
    connect_timeout: options.connectTimeoutSeconds,
    backoff: reconnectDelaySeconds,
    onnotice: () => {},
    connection: { statement_timeout: options.statementTimeoutMs ?? 10_000, application_name: options.applicationName },
    ...primary
  }), options.traced === true ? serverOf(url, options.elector === undefined ? 'replica' : 'primary') : undefined)
}

export async function createDb (options: DbOptions): Promise<DbHandle> {
  const { url } = options
  if (url !== undefined && /^postgres(ql)?:\/\//.test(url)) return createPostgres(url, options)
  if (url === undefined || url.startsWith('memory://')) return createPglite(url === undefined ? options.dataDir ?? DEFAULT_DATA_DIR : undefined, options.traced === true)
  throw new Error('DATABASE_URL must start with postgres://, postgresql:// or memory://')
}

/**
 * A pool on a streaming replica (CONTRACT 11). Connecting gives up quickly: the read router
 * sends the read to the primary instead of making the request wait for a dead replica.
 */
export function createReplica (url: string, options: Pick<DbOptions, 'poolSize' | 'statementTimeoutMs' | 'traced'> = {}): ReplicaHandle {
  const client = postgresPool(url, { max: options.poolSize ?? 5, connectTimeoutSeconds: 3, applicationName: 'messages-api-read', statementTimeoutMs: options.statementTimeoutMs, traced: options.traced })
  return {
    db: drizzlePostgres(client, { schema }),
    async close () {
      await client.end({ timeout: 5 })
    }
  }
}

async function createPostgres (url: string, options: DbOptions): Promise<DbHandle> {
  const elector = new PrimaryElector(url, { probeEveryMs: options.primaryProbeMs ?? PRIMARY_PROBE_MS, connectTimeoutMs: PRIMARY_CONNECT_TIMEOUT_S * 1000, log: options.log ?? SILENT })
  await elector.start()
  // The elector opens every connection (its socket factory); the URL still gives the user, database
  // and TLS settings. Named with one host, so that the driver reports a failed connection at once
  // rather than trying the next host itself.
  const { hosts, urlOf } = parseHosts(url)
  const single = urlOf(hosts[0] ?? { host: 'localhost', port: 5432 })
  const client = postgresPool(single, { max: options.poolSize ?? 10, connectTimeoutSeconds: PRIMARY_CONNECT_TIMEOUT_S, applicationName: 'messages-api', statementTimeoutMs: options.statementTimeoutMs, elector, traced: options.traced })
  const db = drizzlePostgres(client, { schema })
  return {
    db,
    driver: 'postgres',
    history: elector,
    async migrate () {
      // A dedicated single connection: the session-level lock and the migrator must share it.
      const lockClient = driver(single, { max: 1, onnotice: () => {}, socket: elector.socket, target_session_attrs: 'primary' })
      try {
        await lockClient`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`
        await migratePostgres(drizzlePostgres(lockClient), { migrationsFolder: MIGRATIONS_FOLDER })
        await lockClient`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`
      } finally {
        await lockClient.end({ timeout: 5 })
      }
    },
    async close () {
      await client.end({ timeout: 5 })
      await elector.close()
    }
  }
}

/** PGlite is one process's own database: one history, which never changes. */
const PGLITE_HISTORY: HistorySource = {
  current: () => ({ system: 'pglite', timeline: 1, switchpoints: new Map() }),
  onChange: () => () => {},
  suspect: () => {}
}

async function createPglite (dataDir: string | undefined, traced: boolean): Promise<DbHandle> {
  if (dataDir !== undefined) await mkdir(dataDir, { recursive: true })
  // In a thread of its own: PGlite runs each query synchronously, and on the event loop a slow one
  // would stall every request. drizzle sees PGlite's interface; the thread answers it.
  const thread = await PgliteThread.create({ dataDir })
  const client = traced ? tracedPglite(thread) : thread
  const db = drizzlePglite(client as unknown as PGlite, { schema })
  return {
    db,
    driver: 'pglite',
    history: PGLITE_HISTORY,
    async migrate () {
      // PGlite is a single connection, but the lock keeps both paths identical.
      await db.execute(sql`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`)
      try {
        await migratePglite(db, { migrationsFolder: MIGRATIONS_FOLDER })
      } finally {
        await db.execute(sql`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`)
      }
    },
    async close () {
      await client.close()
    }
  }
}
