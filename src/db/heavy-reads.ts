import { sql } from 'drizzle-orm'
import { ClientGoneError, HeavyReadsFullError } from '../errors.js'
import type { Database } from './client.js'

// Reads that walk many rows hold a database connection for as long as they run: a page found by
// walking OFFSET rows, the matching ids of a search term, the anchors of a result set. Anyone may ask
// for them, and each costs the database far more than a page 1, so they are admitted, not queued
// without bound (CONTRACT 16): per database handle (the primary, each replica) a few run, a few wait a
// short while, and the rest are answered 503 at once. Places are shared among clients by address, so
// that one client cannot take them all, and a read whose client has gone is given up.

/**
 * Heavy reads running at once per database handle. The others wait here rather than in the pool's
 * queue, so that writes and short reads still find a connection: two of the default pool of ten. Deep
 * pages by subject on a table being written once took every connection of the pool, and creates waited
 * behind them; a bound of four measured better for single kinds of walk but made the random mix of pages
 * and searches slower (docs/performance.md#expensive-reads-admitted).
 */
export const HEAVY_READS = 8
/**
 * How many of them one client may run at once: one. Each keeps a core of the database busy for as long
 * as it runs, so a client asking for many at once (a flood, or a page of a few searches) gets them one
 * after another, and the cores stay for the cheap requests of everyone and the heavy reads of other
 * clients: with two each, the creates beside a one-address flood missed their p99 of 1 s on two cores
 * (docs/security.md, "Expensive reads are admitted, not queued"; bench row search-flood).
 */
export const HEAVY_READS_PER_CLIENT = 1
/**
 * Heavy reads waiting per handle. The wait (HEAVY_READ_WAIT_MS), not the length of the queue, bounds
 * how long a waiter is held; the queue's bound only keeps its memory small. Heavy reads vary from tens
 * of milliseconds (a rare term) to a second (a common one): with as few waiting as run, a burst of quick
 * ones was refused while every one of them would have started within its wait
 * (docs/performance.md#expensive-reads-admitted).
 */
export const HEAVY_READS_WAITING = 64
/** Waiting per client: what one client's burst may hold of the queue. */
export const HEAVY_READS_WAITING_PER_CLIENT = 2
/**
 * How long a heavy read waits for a place before it is refused. Every answer must come within the
 * statement timeout and 2 seconds (CONTRACT 16): a read that waited this long may still run one
 * statement up to the timeout, and the page's short statements around it need the rest.
 */
export const HEAVY_READ_WAIT_MS = 1000

/**
 * Who a heavy read is for: a client, by its address (as TRUST_PROXY resolves it), and its request's
 * signal. A request's asker reads both only when asked (src/http/asker.ts): read them only for a heavy read.
 */
export interface Asker {
  readonly address: string
  /** Aborts when the client has gone: a read still waiting never starts, and a running one is cancelled. */
  readonly signal?: AbortSignal
}

/**
 * Work that no request owns: the anchors of a result set (src/pages/anchors), read for every later
 * page. Refusing it would refuse nobody but make those pages walk, so it is never refused nor given a
 * bounded wait; and it is one client more in the turn (with a client's share of places running), so it
 * neither starves the clients' reads nor is starved by them.
 */
export const BACKGROUND: Asker = Object.freeze({ address: 'background' })

/** A heavy read: `alone` when no other heavy read ran on its handle as it started; `signal`, its asker's. */
export type HeavyRead<T> = (alone: boolean, signal: AbortSignal | undefined) => Promise<T>

/** What every gate of the process adds to, for /metrics. */
export interface HeavyReadTally {
  running: number
  waiting: number
  /** Refused at once (every place to wait, or the client's share of them, taken), or after waiting. */
  shed: { full: number, waited: number }
  /** Given up because the client had gone: while waiting (never started), or while running (cancelled). */
  abandoned: { waiting: number, running: number }
}

export interface HeavyReadGateOptions {
  running?: number
  runningPerClient?: number
  waiting?: number
  waitingPerClient?: number
  waitMs?: number
  /** Calls `expire` after `ms` unless the returned function is called first (a test drives its own clock). */
  timer?: (ms: number, expire: () => void) => () => void
  tally?: HeavyReadTally
}

const tally: HeavyReadTally = { running: 0, waiting: 0, shed: { full: 0, waited: 0 }, abandoned: { waiting: 0, running: 0 } }

function realTimer (ms: number, expire: () => void): () => void {
  const timer = setTimeout(expire, ms)
  return () => { clearTimeout(timer) }
}

/**
 * `promise`, unless `signal` aborts first: then a ClientGoneError at once, and `gone` is told. The
 * promise itself goes on (for whoever else waits for it, or to free what it holds).
 */
export async function unlessGone<T> (promise: Promise<T>, signal: AbortSignal | undefined, gone?: () => void): Promise<T> {
  if (signal === undefined) return await promise
  if (signal.aborted) {
    gone?.()
    throw new ClientGoneError()
  }
  return await new Promise<T>((resolve, reject) => {
    const leave = (): void => {
      gone?.()
      reject(new ClientGoneError())
    }
    const done = (): void => { signal.removeEventListener('abort', leave) }
    signal.addEventListener('abort', leave, { once: true })
    promise.then(resolve, reject).then(done, done)
  })
}

interface Waiter { start: () => void }
interface Client { key: string | symbol, running: number, queue: Waiter[] }

const BACKGROUND_KEY = Symbol('background')

/**
 * The places of one database handle. Invariant between calls: no waiter could start, that is, every
 * client with waiters runs its share, or every place runs. So a new read starts at once when a place
 * is free and its client is under its share; and when a place frees, the clients with waiters take
 * turns (one read each, round the clients), not the longest pile first.
 */
export class HeavyReadGate {
  readonly #limits: Required<Omit<HeavyReadGateOptions, 'timer' | 'tally'>>
  readonly #timer: NonNullable<HeavyReadGateOptions['timer']>
  readonly #tally: HeavyReadTally
  #running = 0
  // Clients' waiters (the background's are not counted: they are never refused).
  #waiting = 0
  readonly #clients = new Map<string | symbol, Client>()
  // Clients with waiters, in the order of their turns: a client that was served goes to the back.
  readonly #turns = new Map<string | symbol, Client>()

  constructor (options: HeavyReadGateOptions = {}) {
    this.#limits = {
      running: options.running ?? HEAVY_READS,
      runningPerClient: options.runningPerClient ?? HEAVY_READS_PER_CLIENT,
      waiting: options.waiting ?? HEAVY_READS_WAITING,
      waitingPerClient: options.waitingPerClient ?? HEAVY_READS_WAITING_PER_CLIENT,
      waitMs: options.waitMs ?? HEAVY_READ_WAIT_MS
    }
    this.#timer = options.timer ?? realTimer
    this.#tally = options.tally ?? tally
  }

  /** Runs `read` for `asker` when a place is free; refuses it (HeavyReadsFullError) or gives it up (ClientGoneError). */
  async run<T> (asker: Asker, read: HeavyRead<T>): Promise<T> {
    const background = asker === BACKGROUND
    const signal = asker.signal
    if (signal?.aborted === true) {
      this.#tally.abandoned.waiting++
      throw new ClientGoneError()
    }
    const client = this.#clientOf(background ? BACKGROUND_KEY : asker.address)
    if (this.#running < this.#limits.running && client.running < this.#limits.runningPerClient) return await this.#start(client, read, signal)
    if (!background && (this.#waiting >= this.#limits.waiting || client.queue.length >= this.#limits.waitingPerClient)) {
      this.#forget(client)
      this.#tally.shed.full++
      throw new HeavyReadsFullError()
    }
    return await this.#wait(client, read, signal, background)
  }

  #clientOf (key: string | symbol): Client {
    let client = this.#clients.get(key)
    if (client === undefined) {
      client = { key, running: 0, queue: [] }
      this.#clients.set(key, client)
    }
    return client
  }

  #forget (client: Client): void {
    if (client.running === 0 && client.queue.length === 0) this.#clients.delete(client.key)
  }

  async #start<T> (client: Client, read: HeavyRead<T>, signal: AbortSignal | undefined): Promise<T> {
    this.#running++
    client.running++
    this.#tally.running++
    const alone = this.#running === 1
    // The place is held until the read ends, also when its client has gone: until the cancellation
    // lands (or, on PGlite, which cannot cancel, until the statement ends) the database still works.
    const reading = Promise.resolve().then(async () => await read(alone, signal))
    const end = (): void => {
      this.#running--
      client.running--
      this.#tally.running--
      this.#forget(client)
      this.#next()
    }
    reading.then(end, end)
    return await unlessGone(reading, signal, () => { this.#tally.abandoned.running++ })
  }

  async #wait<T> (client: Client, read: HeavyRead<T>, signal: AbortSignal | undefined, background: boolean): Promise<T> {
    return await new Promise<T>((resolve, reject) => {
      let stopTimer = (): void => {}
      // Exactly one of start, gone and the timer's expiry happens: each leaves the queue first.
      const leave = (): void => {
        client.queue.splice(client.queue.indexOf(waiter), 1)
        if (client.queue.length === 0) this.#turns.delete(client.key)
        if (!background) this.#waiting--
        this.#tally.waiting--
        stopTimer()
        signal?.removeEventListener('abort', gone)
      }
      const gone = (): void => {
        leave()
        this.#forget(client)
        this.#tally.abandoned.waiting++
        reject(new ClientGoneError())
      }
      const waiter: Waiter = {
        start: () => {
          leave()
          this.#start(client, read, signal).then(resolve, reject)
        }
      }
      client.queue.push(waiter)
      if (!this.#turns.has(client.key)) this.#turns.set(client.key, client)
      this.#tally.waiting++
      if (background) return
      this.#waiting++
      signal?.addEventListener('abort', gone, { once: true })
      stopTimer = this.#timer(this.#limits.waitMs, () => {
        leave()
        this.#forget(client)
        this.#tally.shed.waited++
        reject(new HeavyReadsFullError())
      })
    })
  }

  /** Starts waiters while places are free: the first client in turn that is under its share, which then goes to the back. */
  #next (): void {
    while (this.#running < this.#limits.running) {
      let next: Waiter | undefined
      for (const [key, client] of this.#turns) {
        if (client.running >= this.#limits.runningPerClient) continue
        this.#turns.delete(key)
        this.#turns.set(key, client)
        next = client.queue[0]
        break
      }
      if (next === undefined) return
      next.start()
    }
  }

  /** Heavy reads of this handle running and waiting. */
  counts (): { running: number, waiting: number } {
    let waiting = 0
    for (const client of this.#turns.values()) waiting += client.queue.length
    return { running: this.#running, waiting }
  }
}

// Per database handle: its gate.
const gates = new WeakMap<object, HeavyReadGate>()

/** Runs `read` for `asker` as the gate of `db` admits it (see HeavyReadGate). */
export async function heavyRead<T> (db: object, asker: Asker, read: HeavyRead<T>): Promise<T> {
  let gate = gates.get(db)
  if (gate === undefined) {
    gate = new HeavyReadGate()
    gates.set(db, gate)
  }
  return await gate.run(asker, read)
}

/**
 * A heavy read given `workMem` for its bitmaps, sorts and hashes, in a read-only transaction of its own
 * (the setting lasts as long as the transaction). With the server's default work_mem (4 MB), the bitmap
 * of a common search term's pages goes lossy past some 60,000 pages of the table, and then every row of
 * every page is checked again, not only the candidates. The memory is taken as needed, up to `workMem`.
 *
 * Only a read that starts alone may have parallel workers (as many as the server allows). Alone, they
 * finish it sooner on cores that would idle; beside other heavy reads they share the same busy cores and
 * add their own coordination: a common word's read took more core time with workers than without
 * (docs/performance.md#search-reads).
 * `read` gets the signal to run its statements with (src/db/statement.ts), so that they are cancelled.
 */
export async function heavyReadWithMemory<T> (db: Database, workMem: string, asker: Asker,
  read: (tx: Database, signal: AbortSignal | undefined) => Promise<T>): Promise<T> {
  return await heavyRead(db, asker, async (alone, signal) => await db.transaction(async (tx) => {
    // The transaction may have waited for a connection of the pool meanwhile.
    signal?.throwIfAborted()
    await tx.execute(alone
      ? sql`select set_config('work_mem', ${workMem}, true)`
      : sql`select set_config('work_mem', ${workMem}, true), set_config('max_parallel_workers_per_gather', '0', true)`)
    return await read(tx as unknown as Database, signal)
  }, { accessMode: 'read only' }))
}

/** Heavy reads running and waiting, refused and given up, over every database handle of the process (for /metrics). */
export function heavyReadCounts (): HeavyReadTally {
  return { running: tally.running, waiting: tally.waiting, shed: { ...tally.shed }, abandoned: { ...tally.abandoned } }
}
