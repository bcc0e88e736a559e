/**
 * The benchmark's own reader of the data, called the oracle throughout the benchmark: the expected
 * totals and page ids by plain count(*) and ORDER BY ... LIMIT/OFFSET queries, never through the service. On PostgreSQL it reads the live database.
 * The embedded database belongs to the one process that opened it, so there it reads a copy taken
 * before the service started: the same data for every read row, blind to the service's writes
 * (`live` is false), which are checked on the real directory once the service has stopped.
 */
import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import postgres from 'postgres'
import { createDb, type DbHandle } from '../../src/db/client.js'

/** A WHERE clause with $1, $2... parameters. */
export interface Where { text: string, params: unknown[] }

export const EVERYTHING: Where = { text: 'true', params: [] }

export interface Oracle {
  /** What answers: "PostgreSQL 15.19" or "PGlite (PostgreSQL 17.5)". */
  readonly label: string
  /** Whether the service's writes are visible here while it runs. */
  readonly live: boolean
  count: (where: Where) => Promise<number>
  /** The ids of one page: ORDER BY `orderBy` LIMIT/OFFSET. */
  ids: (where: Where, orderBy: string, limit: number, offset: number) => Promise<number[]>
  /** How many of `ids` are rows of messages. */
  present: (ids: number[]) => Promise<number>
  /** The database's size on disk, in bytes. */
  bytes: () => Promise<number>
  /** Runs a query of the benchmark's own (statistics, the change log); rows as objects. */
  rows: <T>(text: string, params?: unknown[]) => Promise<T[]>
  close: () => Promise<void>
}

const idsOf = (rows: Array<{ id: string | number }>): number[] => rows.map((r) => Number(r.id))

function oracleOf (label: string, live: boolean, rows: Oracle['rows'], bytes: () => Promise<number>, close: () => Promise<void>): Oracle {
  return {
    label,
    live,
    rows,
    bytes,
    close,
    async count (where) {
      const [row] = await rows<{ n: number }>(`select count(*)::int as n from messages where ${where.text}`, where.params)
      return row!.n
    },
    async ids (where, orderBy, limit, offset) {
      const n = where.params.length
      return idsOf(await rows(`select id from messages where ${where.text} order by ${orderBy} limit $${n + 1} offset $${n + 2}`, [...where.params, limit, offset]))
    },
    async present (ids) {
      if (ids.length === 0) return 0
      const [row] = await rows<{ n: number }>('select count(*)::int as n from messages where id = any($1::bigint[])', [ids])
      return row!.n
    }
  }
}

/** The live PostgreSQL database at url. */
export async function postgresOracle (url: string): Promise<Oracle & { sql: postgres.Sql }> {
  const sql = postgres(url, { max: 2, onnotice: () => {} })
  const rows = async <T>(text: string, params: unknown[] = []): Promise<T[]> => await sql.unsafe(text, params as postgres.ParameterOrJSON<never>[]) as unknown as T[]
  const [row] = await rows<{ version: string }>('select version()')
  const bytes = async (): Promise<number> => Number((await rows<{ n: string }>('select pg_database_size(current_database()) as n'))[0]!.n)
  return { ...oracleOf(row!.version.split(' ').slice(0, 2).join(' '), true, rows, bytes, async () => { await sql.end({ timeout: 5 }) }), sql }
}

/** The bytes of the files under a directory. */
export async function directoryBytes (path: string): Promise<number> {
  let total = 0
  for (const entry of await readdir(path, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) total += (await stat(join(entry.parentPath, entry.name))).size
  }
  return total
}

/**
 * An embedded database directory, opened in its own thread as the service opens it. `live` is the
 * directory the service runs on, whose size `bytes` reports (the copy holds none of its writes).
 */
export async function pgliteOracle (dataDir: string, live = dataDir): Promise<Oracle> {
  const handle: DbHandle = await createDb({ url: undefined, dataDir })
  const client = (handle.db as unknown as { $client: { query: <T>(text: string, params?: unknown[]) => Promise<{ rows: T[] }> } }).$client
  const rows = async <T>(text: string, params: unknown[] = []): Promise<T[]> => (await client.query<T>(text, params)).rows
  const [row] = await rows<{ version: string }>('select version()')
  return oracleOf(`PGlite (${row!.version.split(' ').slice(0, 2).join(' ')})`, false, rows, async () => await directoryBytes(live), async () => { await handle.close() })
}
