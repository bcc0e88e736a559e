import { mkdir } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { PGlite } from '@electric-sql/pglite'
import { pg_trgm as pgTrgm } from '@electric-sql/pglite/contrib/pg_trgm'
import { sql } from 'drizzle-orm'
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'
import * as schema from './schema.js'

/** The one database handle the rest of the code sees, whichever driver is behind it. */
export type Database = PgDatabase<PgQueryResultHKT, typeof schema>

export interface DbHandle {
  db: Database
  driver: 'postgres' | 'pglite'
  /** Applies the migrations in drizzle/ under an advisory lock, so concurrent start-ups do not race. */
  migrate: () => Promise<void>
  close: () => Promise<void>
}

export interface DbOptions {
  /** postgres://, postgresql://, memory://, or undefined for PGlite persisted in dataDir. */
  url: string | undefined
  dataDir?: string
  poolSize?: number
  statementTimeoutMs?: number
}

/** A read replica: queries only, never migrated (it follows the primary's WAL). */
export interface ReplicaHandle {
  db: Database
  close: () => Promise<void>
}

export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url))
export const DEFAULT_DATA_DIR = '.data/pglite'

// Any constant works as long as every instance agrees on it.
const MIGRATION_LOCK_KEY = 7_300_452_031

export async function createDb (options: DbOptions): Promise<DbHandle> {
  const { url } = options
  if (url !== undefined && /^postgres(ql)?:\/\//.test(url)) return createPostgres(url, options)
  if (url === undefined || url.startsWith('memory://')) return createPglite(url === undefined ? options.dataDir ?? DEFAULT_DATA_DIR : undefined)
  throw new Error('DATABASE_URL must start with postgres://, postgresql:// or memory://')
}

/**
 * A pool on a streaming replica (CONTRACT 11). Connecting gives up quickly: the read router
 * sends the read to the primary instead of making the request wait for a dead replica.
 */
export function createReplica (url: string, options: Pick<DbOptions, 'poolSize' | 'statementTimeoutMs'> = {}): ReplicaHandle {
  const client = postgres(url, {
    max: options.poolSize ?? 5,
    idle_timeout: 30,
    connect_timeout: 3,
    onnotice: () => {},
    connection: { statement_timeout: options.statementTimeoutMs ?? 10_000, application_name: 'messages-api-read' }
  })
  return {
    db: drizzlePostgres(client, { schema }),
    async close () {
      await client.end({ timeout: 5 })
    }
  }
}

function createPostgres (url: string, options: DbOptions): DbHandle {
  const client = postgres(url, {
    max: options.poolSize ?? 10,
    idle_timeout: 30,
    connect_timeout: 10,
    onnotice: () => {},
    connection: { statement_timeout: options.statementTimeoutMs ?? 10_000, application_name: 'messages-api' }
  })
  const db = drizzlePostgres(client, { schema })
  return {
    db,
    driver: 'postgres',
    async migrate () {
      // A dedicated single connection: the session-level lock and the migrator must share it.
      const lockClient = postgres(url, { max: 1, onnotice: () => {} })
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
    }
  }
}

async function createPglite (dataDir: string | undefined): Promise<DbHandle> {
  if (dataDir !== undefined) await mkdir(dataDir, { recursive: true })
  const client = await PGlite.create({ dataDir, extensions: { pg_trgm: pgTrgm } })
  const db = drizzlePglite(client, { schema })
  return {
    db,
    driver: 'pglite',
    async migrate () {
      // PGlite is a single in-process connection, but the lock keeps both paths identical.
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
