import { fillPlaceholders, type SQL } from 'drizzle-orm'
import { PgDialect, type PgPreparedQuery, type PreparedQueryConfig } from 'drizzle-orm/pg-core'
import { cancelQuery, type CancellableQuery, type Database } from './client.js'

const dialect = new PgDialect()

/**
 * A statement built once and run many times: `params` fill its `sql.placeholder()`s. With `signal`,
 * it is not started once the signal has aborted, and is cancelled when it aborts while it runs.
 */
export type Statement<Row> = (db: Database, params: Record<string, unknown>, signal?: AbortSignal) => Promise<Row[]>

type Unsafe = (query: string, params: unknown[], options: { prepare: boolean }) => CancellableQuery<unknown[]>

/** The postgres driver's client of a handle or of a transaction (a session's), or undefined on PGlite. */
function postgresClientOf (db: Database): { unsafe: Unsafe } | undefined {
  const client = (db._.session as unknown as { client?: { unsafe?: unknown } }).client
  return typeof client?.unsafe === 'function' ? client as { unsafe: Unsafe } : undefined
}

/** Runs `query` (not started yet) unless `signal` has aborted, and cancels it if it aborts before the answer. */
async function untilAborted<T> (query: CancellableQuery<T>, signal: AbortSignal): Promise<T> {
  let settled = false
  const cancel = (): void => { cancelQuery(query, () => settled) }
  signal.addEventListener('abort', cancel, { once: true })
  try {
    return await query
  } finally {
    settled = true
    signal.removeEventListener('abort', cancel)
  }
}

/**
 * Turns SQL into a named prepared statement, rendered once and prepared once per database handle
 * (the primary or a replica). The hot read paths use it: rendering a query on every request, and
 * planning it, cost more than running it. Rows come back as the driver parses them, so the SQL casts
 * what it returns to types both drivers parse alike (float8, text).
 */
export function statement<Row> (name: string, query: SQL): Statement<Row> {
  const rendered = dialect.sqlToQuery(query)
  const prepared = new WeakMap<Database, PgPreparedQuery<PreparedQueryConfig>>()
  return async function run (db, params, signal) {
    if (signal !== undefined) {
      signal.throwIfAborted()
      // Sent through the session's client, as drizzle's prepared query sends it, to keep the query it
      // makes, which can be cancelled. PGlite cannot cancel one: a statement started runs to its end.
      const client = postgresClientOf(db)
      if (client !== undefined) return await untilAborted(client.unsafe(rendered.sql, fillPlaceholders(rendered.params, params), { prepare: true }), signal) as Row[]
    }
    let query = prepared.get(db)
    if (query === undefined) {
      query = db._.session.prepareQuery(rendered, undefined, name, false)
      prepared.set(db, query)
    }
    const result = await query.execute(params) as Row[] | { rows: Row[] }
    // postgres.js answers with the rows, PGlite with a result object holding them.
    return Array.isArray(result) ? result : result.rows
  }
}

/** A row as the server sent it: each column's text, as bytes, or null. */
export type RawRow = Array<Buffer | null>

interface PostgresClient { unsafe: (query: string, params: unknown[], options: { prepare: boolean }) => { raw: () => Promise<RawRow[]> } }
interface PgliteClient { query: (query: string, params: unknown[], options: { rowMode: 'array' }) => Promise<{ rows: unknown[][] }> }

/**
 * A statement whose rows come back as bytes, for answers the database renders whole (the delta sync
 * pages): postgres.js hands over each column as a view of the bytes it received, never decoding a
 * text only to encode it again for the reply. PGlite hands over parsed values (from its thread), made
 * their text's bytes here (so the SQL returns text, or numbers whose String() is their text).
 */
export function rawStatement (query: SQL): (db: Database, params: Record<string, unknown>) => Promise<RawRow[]> {
  const rendered = dialect.sqlToQuery(query)
  return async function run (db, params) {
    const client = (db as unknown as { $client: PostgresClient | PgliteClient }).$client
    const values = fillPlaceholders(rendered.params, params)
    if ('unsafe' in client) return await client.unsafe(rendered.sql, values, { prepare: true }).raw()
    const { rows } = await client.query(rendered.sql, values, { rowMode: 'array' })
    return rows.map((row) => row.map((value) => value === null ? null : Buffer.from(String(value))))
  }
}
