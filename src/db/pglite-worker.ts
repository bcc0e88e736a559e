// The embedded PostgreSQL's own thread. PGlite runs its queries synchronously in WebAssembly: on the
// service's event loop, one slow query would stall every request. Here it stalls only this thread.
// The protocol is src/db/pglite-thread.ts's; this side only runs what it is sent.
import { parentPort, workerData } from 'node:worker_threads'
import { PGlite, type QueryOptions, type Results, type Transaction } from '@electric-sql/pglite'
import { pg_trgm as pgTrgm } from '@electric-sql/pglite/contrib/pg_trgm'
import { type Reply, type Request, type WorkerOptions, serializeError } from './pglite-protocol.js'

const port = parentPort!
const { dataDir, runtime } = workerData as WorkerOptions

/** A column type read as its text: the parsers the caller asked for (see textTypes in the protocol). */
const asText = (value: string): string => value

interface OpenTransaction {
  tx: Transaction
  /** Ends the transaction: true commits, false rolls back. */
  end: (commit: boolean) => void
  /** Settles once COMMIT or ROLLBACK has run. */
  done: Promise<unknown>
}

const open = new Map<number, OpenTransaction>()
let nextTransaction = 1

function optionsOf (request: Extract<Request, { op: 'query' }>): QueryOptions {
  const options: QueryOptions = {}
  if (request.rowMode !== undefined) options.rowMode = request.rowMode
  if (request.textTypes.length > 0) options.parsers = Object.fromEntries(request.textTypes.map((oid) => [oid, asText]))
  if (request.blob !== undefined) options.blob = request.blob
  return options
}

function target (pg: PGlite, transaction: number | undefined): PGlite | Transaction {
  if (transaction === undefined) return pg
  const entry = open.get(transaction)
  if (entry === undefined) throw new Error(`transaction ${transaction} is not open`)
  return entry.tx
}

/** Opens a transaction that stays open, holding PGlite's lock, until an 'end' request names it. */
async function begin (pg: PGlite): Promise<number> {
  const id = nextTransaction++
  return await new Promise<number>((resolve, reject) => {
    let end!: (commit: boolean) => void
    const decided = new Promise<boolean>((resolve) => { end = resolve })
    const done = pg.transaction(async (tx) => {
      open.set(id, { tx, end, done })
      resolve(id)
      if (!await decided && !tx.closed) await tx.rollback()
    }).finally(() => open.delete(id))
    // BEGIN itself failed: the callback never ran.
    done.catch(reject)
  })
}

async function run (pg: PGlite, request: Request): Promise<unknown> {
  switch (request.op) {
    case 'query': {
      const result: Results = await target(pg, request.transaction).query(request.sql, request.params, optionsOf(request))
      return result
    }
    case 'exec':
      return await target(pg, request.transaction).exec(request.sql)
    case 'begin':
      return await begin(pg)
    case 'end': {
      const entry = open.get(request.transaction)
      if (entry === undefined) throw new Error(`transaction ${request.transaction} is not open`)
      entry.end(request.commit)
      await entry.done
      return null
    }
    case 'close':
      await pg.close()
      return null
  }
}

async function main (): Promise<void> {
  const pg = await PGlite.create({ dataDir, extensions: { pg_trgm: pgTrgm }, pgliteWasmModule: runtime?.wasmModule, fsBundle: runtime?.fsBundle })
  port.on('message', (request: Request) => {
    run(pg, request).then(
      (result) => { port.postMessage({ id: request.id, ok: true, result } satisfies Reply) },
      (err: unknown) => { port.postMessage({ id: request.id, ok: false, error: serializeError(err) } satisfies Reply) }
    )
  })
  port.postMessage({ id: 0, ok: true, result: 'ready' } satisfies Reply)
}

main().catch((err: unknown) => {
  port.postMessage({ id: 0, ok: false, error: serializeError(err) } satisfies Reply)
})
