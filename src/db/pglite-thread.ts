// PGlite in a worker thread, behind the part of PGlite's own interface that drizzle-orm/pglite and
// the service use (query, exec, transaction, close). drizzle runs on it unchanged; only the thread
// the queries run on differs.
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { Worker, type ResourceLimits } from 'node:worker_threads'
import type { QueryOptions, Results } from '@electric-sql/pglite'
import { type PgliteRuntime, type Reply, type Request, type SerializedError, type WorkerOptions, deserializeError } from './pglite-protocol.js'

/** A request without its id: the id is the client's to give. */
type Outgoing = Request extends infer R ? R extends { id: number } ? Omit<R, 'id'> : never : never

/** What a query or a transaction's body may be handed: PGlite's calls, run in the thread. */
export interface PgliteQueries {
  query: <T>(sql: string, params?: unknown[], options?: QueryOptions) => Promise<Results<T>>
  exec: (sql: string) => Promise<Results[]>
}

export interface PgliteTransaction extends PgliteQueries {
  rollback: () => Promise<void>
  readonly closed: boolean
}

// The worker is compiled next to this file, in dist/. Run from source (npm start, the tests), the
// worker thread does not inherit the loader that compiles TypeScript in this one. It is started
// without the parent's flags and loads its module through tsx's require hook, which compiles in the
// thread itself: the ESM loader (an inherited --import tsx) would start a loader thread of its own
// for every database opened, and cost each one a sixth more CPU (the tests open hundreds).
const FROM_SOURCE = import.meta.url.endsWith('.ts')
const WORKER_URL = new URL(`./pglite-worker${FROM_SOURCE ? '.ts' : '.js'}`, import.meta.url)
const FROM_SOURCE_BOOTSTRAP = `
  const { workerData } = require('node:worker_threads')
  require(workerData.tsx).register()
  require(workerData.entry)`

export interface ThreadOptions {
  /** Bounds on the thread's own JavaScript heap (results are built there before they are copied over). */
  resourceLimits?: ResourceLimits
  /**
   * Called once if the thread dies after it started (not on close). By default the error is thrown as
   * uncaught: the database is part of this process, as PGlite in process was, and a process without it
   * can answer nothing, so it ends (the server's close-with-grace logs it and exits 1) and is restarted.
   */
  onFailure?: (err: Error) => void
}

const failLoudly = (err: Error): void => { process.nextTick(() => { throw err }) }

// PGlite's WebAssembly, compiled once per process and handed to every thread (a compiled module is
// shared, not copied): each new thread would otherwise compile it again, and tier its hot functions up
// again, which made opening a database slower (docs/performance.md#the-embedded-databases-threads; the
// tests open hundreds).
// (TypeScript declares WebAssembly only with the DOM's library; Node has it as a global all the same.)
declare const WebAssembly: { compile: (bytes: Uint8Array) => Promise<PgliteRuntime['wasmModule']> }
let runtime: Promise<PgliteRuntime> | undefined
function pgliteRuntime (): Promise<PgliteRuntime> {
  runtime ??= (async () => {
    const dist = new URL('.', import.meta.resolve('@electric-sql/pglite'))
    const [wasm, data] = await Promise.all([readFile(new URL('pglite.wasm', dist)), readFile(new URL('pglite.data', dist))])
    return { wasmModule: await WebAssembly.compile(wasm), fsBundle: new Blob([data]) }
  })()
  return runtime
}

async function startWorker (options: WorkerOptions, resourceLimits: ResourceLimits | undefined): Promise<Worker> {
  const workerData: WorkerOptions = { ...options, runtime: await pgliteRuntime() }
  if (!FROM_SOURCE) return new Worker(WORKER_URL, { workerData, resourceLimits })
  return new Worker(FROM_SOURCE_BOOTSTRAP, {
    eval: true,
    resourceLimits,
    execArgv: [],
    workerData: { ...workerData, tsx: createRequire(import.meta.url).resolve('tsx/cjs/api'), entry: fileURLToPath(WORKER_URL) }
  })
}

// drizzle passes its parsers as functions, which cannot cross a thread. Every one it passes keeps a
// column's text as it is; a parser that would change the text is refused rather than dropped.
const PROBE = 'probe-text'
const textTypesOf = new WeakMap<object, number[]>()
function textTypes (parsers: QueryOptions['parsers']): number[] {
  if (parsers === undefined) return []
  let types = textTypesOf.get(parsers)
  if (types === undefined) {
    types = Object.entries(parsers).map(([oid, parse]) => {
      if (parse(PROBE, Number(oid)) !== PROBE) throw new Error(`the PGlite thread takes only parsers that keep the text (type ${oid})`)
      return Number(oid)
    })
    textTypesOf.set(parsers, types)
  }
  return types
}

export class PgliteThread implements PgliteQueries {
  readonly #worker: Worker
  readonly #pending = new Map<number, { resolve: (value: unknown) => void, reject: (err: Error) => void }>()
  #nextId = 1
  /** Why the thread can take no more requests; undefined while it runs. */
  #stopped: Error | undefined
  /** Set once the database is open: a failure after that is the thread dying, not failing to start. */
  #onFailure: ((err: Error) => void) | undefined

  private constructor (worker: Worker) {
    this.#worker = worker
    this.#worker.unref()
    this.#worker.on('message', (reply: Reply) => { this.#settle(reply) })
    this.#worker.on('error', (err) => { this.#fail(err) })
    this.#worker.on('exit', (code) => { this.#fail(new Error(`the PGlite thread exited (code ${code})`)) })
  }

  /** Starts the thread and resolves once the database is open (created and recovered if need be). */
  static async create (options: WorkerOptions, thread: ThreadOptions = {}): Promise<PgliteThread> {
    const client = new PgliteThread(await startWorker(options, thread.resourceLimits))
    try {
      await client.#expect(0)
    } catch (err) {
      await client.#worker.terminate()
      throw err
    }
    client.#onFailure = thread.onFailure ?? failLoudly
    return client
  }

  async query<T> (sql: string, params?: unknown[], options: QueryOptions = {}, transaction?: number): Promise<Results<T>> {
    return await this.#call({
      op: 'query',
      sql,
      params,
      rowMode: options.rowMode,
      textTypes: textTypes(options.parsers),
      blob: options.blob,
      transaction
    }) as Results<T>
  }

  async exec (sql: string, transaction?: number): Promise<Results[]> {
    return await this.#call({ op: 'exec', sql, transaction }) as Results[]
  }

  /**
   * Runs body in a transaction held open in the thread: PGlite queues every other query behind it,
   * as it would in process. Commits when body resolves, rolls back when it throws.
   */
  async transaction<T> (body: (tx: PgliteTransaction) => Promise<T>): Promise<T> {
    const id = await this.#call({ op: 'begin' }) as number
    let closed = false
    const end = async (commit: boolean): Promise<void> => {
      if (closed) return
      closed = true
      await this.#call({ op: 'end', transaction: id, commit })
    }
    const tx: PgliteTransaction = {
      query: async (sql, params, options) => await this.query(sql, params, options, id),
      exec: async (sql) => await this.exec(sql, id),
      rollback: async () => { await end(false) },
      get closed () { return closed }
    }
    let result: T
    try {
      result = await body(tx)
    } catch (err) {
      await end(false).catch(() => {})
      throw err
    }
    await end(true)
    return result
  }

  /** Closes the database (a checkpoint to disk for a data directory), then ends the thread. */
  async close (): Promise<void> {
    if (this.#stopped !== undefined) return
    await this.#call({ op: 'close' })
    this.#stop(new Error('the PGlite thread is closed'))
    await this.#worker.terminate()
  }

  async #call (request: Outgoing): Promise<unknown> {
    if (this.#stopped !== undefined) throw this.#stopped
    const id = this.#nextId++
    const reply = this.#expect(id)
    this.#worker.postMessage({ ...request, id })
    return await reply
  }

  /** Resolves with reply id's result. While any reply is awaited, the thread keeps the process alive. */
  async #expect (id: number): Promise<unknown> {
    return await new Promise((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref()
      this.#pending.set(id, { resolve, reject })
    })
  }

  #settle (reply: Reply): void {
    const waiting = this.#pending.get(reply.id)
    if (waiting === undefined) return
    this.#forget(reply.id)
    if (reply.ok) waiting.resolve(reply.result)
    else waiting.reject(deserializeError(reply.error satisfies SerializedError))
  }

  #forget (id: number): void {
    this.#pending.delete(id)
    if (this.#pending.size === 0) this.#worker.unref()
  }

  #fail (err: Error): void {
    const first = this.#stopped === undefined
    this.#stop(err)
    if (first) this.#onFailure?.(err)
  }

  /** The thread is gone or closing: whatever still waits fails with why, and so will later calls. */
  #stop (reason: Error): void {
    this.#stopped ??= reason
    for (const [id, waiting] of this.#pending) {
      this.#forget(id)
      waiting.reject(this.#stopped)
    }
  }
}
