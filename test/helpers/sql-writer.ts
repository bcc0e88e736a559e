import type { PGlite, Transaction } from '@electric-sql/pglite'
import postgres from 'postgres'
import type { App } from '../../src/app.js'
import { bounded } from './bounded.js'

// The SQL writers of the property tests (delta sync, live delivery): statements and COPY written as
// psql would, on a client of their own (PostgreSQL) or on the one embedded connection (PGlite).

/** The columns every COPY and INSERT of the property tests names. */
export const COLUMNS = 'messages (id, content, subject, priority, author_id, created_at)'
/** How long a COPY may take before it counts as hung: neither finished nor refused. */
const COPY_WAIT_MS = 30_000

/** What one writer may run statements on: a session of its own, or a transaction in it. */
export interface Session {
  exec: (text: string) => Promise<void>
  copy: (data: string) => Promise<void>
}

export interface Writer extends Session {
  /** Runs `body` in one transaction: committed when it returns, rolled back when it throws. */
  tx: (body: (s: Session) => Promise<void>) => Promise<void>
  close: () => Promise<void>
}

/** A client of its own on PostgreSQL, like psql. */
export function postgresWriter (url: string): Writer {
  const client = postgres(url, { max: 1, onnotice: () => {} })
  const session = (q: postgres.Sql | postgres.TransactionSql): Session => ({
    async exec (text) { await q.unsafe(text) },
    async copy (data) {
      const query = q.unsafe(`COPY ${COLUMNS} FROM STDIN`)
      // The driver settles the query with the COPY's stream; a refusal the server sends once the data
      // is in (a deadlock met by a statement trigger, say) then reaches only the query's own reject,
      // and the stream never finishes. Heard there, it fails the COPY as any other statement fails.
      const refusal = new Promise<never>((_resolve, reject) => {
        const settled = query as unknown as { reject: (err: unknown) => void }
        const rejectQuery = settled.reject
        settled.reject = (err) => { reject(err); rejectQuery(err) }
      })
      refusal.catch(() => {})
      const writable = await query.writable()
      // Bounded as well: a stream that neither finishes nor is refused fails rather than hangs.
      await bounded(Promise.race([refusal, new Promise<void>((resolve, reject) => {
        writable.on('error', reject)
        writable.end(data, () => resolve())
      })]), COPY_WAIT_MS)
      await q`select 1`
    }
  })
  return {
    ...session(client),
    async tx (body) { await client.begin(async (tx) => { await body(session(tx)) }) },
    async close () { await client.end({ timeout: 5 }) }
  }
}

/** PGlite has one connection, embedded: every SQL writer runs on it, COPY from a blob. */
export function pgliteWriter (app: App): Writer {
  const pglite = (app.db as unknown as { $client: PGlite }).$client
  const session = (q: PGlite | Transaction): Session => ({
    async exec (text) { await q.query(text) },
    async copy (data) { await q.query(`COPY ${COLUMNS} FROM '/dev/blob'`, [], { blob: new Blob([data]) }) }
  })
  return {
    ...session(pglite),
    async tx (body) { await pglite.transaction(async (tx) => { await body(session(tx)) }) },
    async close () {}
  }
}
