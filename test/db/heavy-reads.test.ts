import { sql } from 'drizzle-orm'
import t from 'tap'
import {
  BACKGROUND, HEAVY_READS, HEAVY_READS_PER_CLIENT, HEAVY_READS_WAITING, HEAVY_READS_WAITING_PER_CLIENT, HeavyReadGate, heavyRead, heavyReadWithMemory,
  type Asker, type HeavyReadGateOptions, type HeavyReadTally
} from '../../src/db/heavy-reads.js'
import { ClientGoneError, HeavyReadsFullError } from '../../src/errors.js'
import { build } from '../helpers/build.js'
import { queryRows } from '../helpers/fixtures.js'

// CONTRACT 16: expensive reads are admitted per database handle. A few run, a few wait a bounded
// time, the rest are refused at once; one client cannot take every place; a read whose client has
// gone never starts, or is given up. The gate is driven by promises and a clock of the test's own.

interface Gate<T = string> { promise: Promise<T>, open: (value: T) => void, fail: (err: Error) => void }
function gate<T = string> (): Gate<T> {
  let open!: (value: T) => void
  let fail!: (err: Error) => void
  const promise = new Promise<T>((resolve, reject) => { open = resolve; fail = reject })
  return { promise, open, fail }
}
const settle = async (): Promise<void> => { await new Promise((resolve) => setImmediate(resolve)) }

/** A clock that moves only when the test says: `expire()` ends every wait begun so far. */
function testClock () {
  const waits = new Set<() => void>()
  return {
    timer: (_ms: number, expire: () => void) => {
      waits.add(expire)
      return () => { waits.delete(expire) }
    },
    pending: () => waits.size,
    expire: () => {
      const due = [...waits]
      waits.clear()
      for (const expire of due) expire()
    }
  }
}

const newTally = (): HeavyReadTally => ({ running: 0, waiting: 0, shed: { full: 0, waited: 0 }, abandoned: { waiting: 0, running: 0 } })

/** A gate on the test's clock and tally, and reads whose end the test decides. */
function harness (options: HeavyReadGateOptions = {}) {
  const clock = testClock()
  const tally = newTally()
  const subject = new HeavyReadGate({ timer: clock.timer, tally, ...options })
  const started: string[] = []
  const held = new Map<string, Gate>()
  const signals = new Map<string, AbortSignal | undefined>()
  const outcomes = new Map<string, string>()
  /** Asks for a read named `name`; its outcome is 'ok', 'refused' (503), 'gone' (the client left), or its error's message. */
  const ask = (asker: Asker, name: string): Promise<string> => {
    const g = gate()
    held.set(name, g)
    const answer = subject.run(asker, async (_alone, signal) => {
      started.push(name)
      signals.set(name, signal)
      return await g.promise
    })
    const failure = (err: Error): string => err instanceof HeavyReadsFullError ? 'refused' : err instanceof ClientGoneError ? 'gone' : err.message
    return answer.then(() => 'ok', failure).then((outcome) => {
      outcomes.set(name, outcome)
      return outcome
    })
  }
  /** Ends the read `name` (which frees its place). */
  const end = async (name: string): Promise<void> => {
    held.get(name)!.open(name)
    await settle()
  }
  return { subject, clock, tally, started, held, signals, outcomes, ask, end }
}

const from = (address: string, signal?: AbortSignal): Asker => ({ address, signal })

t.test('each database handle has its own places; the first read of a handle runs alone', async (t) => {
  const primary = {}
  const replica = {}
  const gates = Array.from({ length: HEAVY_READS }, () => gate())
  const alone: boolean[] = []
  // Every read from another client, so that no client's share limits them.
  const reads = gates.map(async (g, n) => await heavyRead(primary, from(`10.0.0.${n}`), async (first) => { alone[n] = first; return await g.promise }))
  await settle()
  t.same(alone, gates.map((_, n) => n === 0), `${HEAVY_READS} run at once, the first alone, the others beside it`)
  let replicaAlone: boolean | undefined
  const other = gate()
  const onReplica = heavyRead(replica, from('10.0.0.1'), async (first) => { replicaAlone = first; return await other.promise })
  await settle()
  t.equal(replicaAlone, true, 'another handle does not wait for this one, and is alone on it')
  gates[1]!.fail(new Error('statement timeout'))
  await t.rejects(reads[1]!, { message: 'statement timeout' }, 'a failed read fails its caller')
  for (const [n, g] of gates.entries()) g.open(`read ${n}`)
  other.open('replica')
  t.same(await Promise.all(reads.filter((_, n) => n !== 1)), gates.map((_, n) => `read ${n}`).filter((_, n) => n !== 1))
  t.equal(await onReplica, 'replica')
})

t.test('a failed read frees its place for the next', async (t) => {
  const h = harness({ running: 1 })
  const failing = h.ask(from('192.0.2.1'), 'failing')
  h.ask(from('192.0.2.2'), 'next')
  await settle()
  h.held.get('failing')!.fail(new Error('statement timeout'))
  t.equal(await failing, 'statement timeout')
  await settle()
  t.same(h.started, ['failing', 'next'])
})

t.test('a client runs its share and waits its share; beyond that it is refused at once', async (t) => {
  const h = harness()
  const answers = Array.from({ length: HEAVY_READS_PER_CLIENT + HEAVY_READS_WAITING_PER_CLIENT + 2 }, async (_, n) => await h.ask(from('192.0.2.1'), `a${n}`))
  await settle()
  t.equal(h.started.length, HEAVY_READS_PER_CLIENT, `${HEAVY_READS_PER_CLIENT} run, although places are free`)
  t.same(h.subject.counts(), { running: HEAVY_READS_PER_CLIENT, waiting: HEAVY_READS_WAITING_PER_CLIENT })
  t.same([...h.outcomes.values()], ['refused', 'refused'], 'the rest are refused before any read ended')
  t.equal(h.tally.shed.full, 2)

  const other = h.ask(from('192.0.2.2'), 'b0')
  await settle()
  t.same(h.started.at(-1), 'b0', 'another client starts at once in a free place')
  await h.end('a0')
  const admitted = HEAVY_READS_PER_CLIENT + HEAVY_READS_WAITING_PER_CLIENT
  t.same(h.started.at(-1), `a${HEAVY_READS_PER_CLIENT}`, 'a place of the client\'s own frees: its first waiter starts')
  for (let n = 1; n < admitted; n++) await h.end(`a${n}`)
  await h.end('b0')
  t.same(await Promise.all(answers), [...Array(admitted).fill('ok'), 'refused', 'refused'])
  t.equal(await other, 'ok')
  t.same(h.subject.counts(), { running: 0, waiting: 0 })
})

t.test('when every place to wait is taken, a read is refused at once', async (t) => {
  const h = harness()
  const clients = (count: number, prefix: string) => Array.from({ length: count }, (_, n) => from(`${prefix}.${n}`))
  // Places to run, then to wait, each client using its whole share of them.
  const runners = clients(HEAVY_READS / HEAVY_READS_PER_CLIENT, '198.51.100')
  const waiters = clients(HEAVY_READS_WAITING / HEAVY_READS_WAITING_PER_CLIENT, '203.0.113')
  for (const [n, asker] of runners.entries()) for (let i = 0; i < HEAVY_READS_PER_CLIENT; i++) h.ask(asker, `run${n}.${i}`)
  for (const [n, asker] of waiters.entries()) for (let i = 0; i < HEAVY_READS_WAITING_PER_CLIENT; i++) h.ask(asker, `wait${n}.${i}`)
  await settle()
  t.same(h.subject.counts(), { running: HEAVY_READS, waiting: HEAVY_READS_WAITING })
  t.equal(await h.ask(from('192.0.2.99'), 'late'), 'refused', 'a new client is refused at once, no read having ended')
  t.equal(h.clock.pending(), HEAVY_READS_WAITING, 'and is not waiting')
})

t.test('a read waits a bounded time, then is refused; it never starts', async (t) => {
  const h = harness({ running: 1 })
  h.ask(from('192.0.2.1'), 'running')
  const waiting = h.ask(from('192.0.2.2'), 'waiting')
  await settle()
  t.equal(h.clock.pending(), 1, 'the waiting read has a bounded wait')
  h.clock.expire()
  t.equal(await waiting, 'refused', 'refused when its wait ends')
  t.same(h.tally.shed, { full: 0, waited: 1 })
  await h.end('running')
  t.same(h.started, ['running'], 'and it never started, even with its place free')
  t.same(h.subject.counts(), { running: 0, waiting: 0 })
})

t.test('a place that frees goes to the clients in turn, not to the longest pile', async (t) => {
  const h = harness({ running: 2, runningPerClient: 2, waitingPerClient: 4 })
  const a = from('192.0.2.1')
  for (let n = 0; n < 5; n++) h.ask(a, `a${n}`)
  h.ask(from('192.0.2.2'), 'b0')
  h.ask(from('192.0.2.3'), 'c0')
  h.ask(from('192.0.2.2'), 'b1')
  await settle()
  t.same(h.started, ['a0', 'a1'])
  for (const name of ['a0', 'a1', 'a2', 'b0', 'c0', 'a3']) await h.end(name)
  // Arrival order would have been a2 a3 a4 b0 c0 b1.
  t.same(h.started, ['a0', 'a1', 'a2', 'b0', 'c0', 'a3', 'b1', 'a4'], 'one read of each waiting client in turn')
})

t.test('a read whose client has gone while it waits never starts, and frees its place to wait', async (t) => {
  const h = harness({ running: 1 })
  h.ask(from('192.0.2.1'), 'running')
  const leaving = new AbortController()
  const gone = h.ask(from('192.0.2.2', leaving.signal), 'gone')
  const next = h.ask(from('192.0.2.3'), 'next')
  await settle()
  leaving.abort()
  t.equal(await gone, 'gone', 'its caller is answered at once')
  t.same(h.subject.counts(), { running: 1, waiting: 1 })
  t.equal(h.clock.pending(), 1, 'its wait is over')
  await h.end('running')
  t.same(h.started, ['running', 'next'], 'the freed place goes to the next one; the one whose client left never started')
  await h.end('next')
  t.equal(await next, 'ok')
  t.same(h.tally.abandoned, { waiting: 1, running: 0 })

  const early = new AbortController()
  early.abort()
  t.equal(await h.ask(from('192.0.2.4', early.signal), 'already gone'), 'gone', 'a client gone before it asked is answered at once')
  t.notOk(h.started.includes('already gone'), 'and its read never started')
})

t.test('a running read whose client has gone: its caller is answered at once, the read is told, and holds its place until it ends', async (t) => {
  const h = harness({ running: 1 })
  const leaving = new AbortController()
  const running = h.ask(from('192.0.2.1', leaving.signal), 'running')
  const next = h.ask(from('192.0.2.2'), 'next')
  await settle()
  leaving.abort()
  t.equal(await running, 'gone', 'answered without waiting for the read to end')
  t.equal(h.signals.get('running')?.aborted, true, 'the read has the aborted signal, to cancel its statement with')
  t.same(h.subject.counts(), { running: 1, waiting: 1 }, 'the database still works on it: its place stays taken')
  await h.end('running')
  t.same(h.started, ['running', 'next'], 'its end frees the place')
  await h.end('next')
  t.equal(await next, 'ok')
  t.same(h.tally.abandoned, { waiting: 0, running: 1 })
})

t.test('background work is never refused and takes its turn like one more client', async (t) => {
  const h = harness({ running: 2, runningPerClient: 2, waiting: 1, waitingPerClient: 1 })
  h.ask(from('192.0.2.1'), 'a0')
  h.ask(from('192.0.2.1'), 'a1')
  h.ask(from('192.0.2.2'), 'b0')
  const background = Array.from({ length: 4 }, async (_, n) => await h.ask(BACKGROUND, `bg${n}`))
  await settle()
  t.same(h.subject.counts(), { running: 2, waiting: 5 }, 'every place to wait is taken, and background work waits all the same')
  t.equal(await h.ask(from('192.0.2.3'), 'c0'), 'refused', 'a client beyond the places to wait is refused')
  t.equal(h.clock.pending(), 1, 'background work has no bounded wait')
  h.clock.expire()
  await settle()
  t.same([...h.outcomes.entries()].filter(([name]) => name.startsWith('bg')), [], 'and is not refused when the clients\' waits end')
  t.equal(h.outcomes.get('b0'), 'refused')
  h.ask(from('192.0.2.2'), 'b1')
  await settle()
  await h.end('a0')
  await h.end('a1')
  t.same(h.started, ['a0', 'a1', 'bg0', 'b1'], 'background and clients alternate')
  await h.end('bg0')
  await h.end('b1')
  t.same(h.started.slice(4), ['bg1', 'bg2'], 'background work runs a client\'s share at a time, once nobody else waits')
  for (const name of ['bg1', 'bg2', 'bg3']) await h.end(name)
  t.same(await Promise.all(background), ['ok', 'ok', 'ok', 'ok'])
})

t.test('a read that starts beside another heavy read gets no parallel workers', async (t) => {
  const app = await build(t)
  const asker = from('127.0.0.1')
  const workers = async (): Promise<string> => await heavyReadWithMemory(app.db, '64MB', asker, async (tx) => {
    const [row] = await queryRows<{ workers: string, memory: string }>(tx, sql`select current_setting('max_parallel_workers_per_gather') as workers, current_setting('work_mem') as memory`)
    t.equal(row!.memory, '64MB', 'the read has its memory')
    return row!.workers
  })
  const [server] = await queryRows<{ workers: string }>(app.db, sql`select current_setting('max_parallel_workers_per_gather') as workers`)
  // PGlite allows none; the PostgreSQL pass of the suite checks what changes.
  if ((process.env.TEST_DATABASE_URL ?? '') !== '') t.not(server!.workers, '0', 'the server allows workers')
  t.equal(await workers(), server!.workers, 'alone: as many as the server allows')
  const held = gate()
  const other = heavyRead(app.db, from('127.0.0.2'), async () => await held.promise)
  await settle()
  t.equal(await workers(), '0', 'beside another: none')
  held.open('done')
  await other
  t.equal(await workers(), server!.workers, 'alone again: as many as the server allows')
})

t.test('the refusal and the departure are the errors the API answers with', async (t) => {
  t.match(new HeavyReadsFullError(), { statusCode: 503, message: 'Service unavailable' })
  t.match(new ClientGoneError(), { statusCode: 499 })
})
