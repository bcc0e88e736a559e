import { sql } from 'drizzle-orm'
import t from 'tap'
import { HEAVY_READS, heavyRead, heavyReadCounts, heavyReadWithMemory } from '../../src/db/heavy-reads.js'
import { build } from '../helpers/build.js'
import { queryRows } from '../helpers/fixtures.js'

// Reads that walk many rows hold a connection while they run: at most HEAVY_READS of them run at once
// per database handle, so that they cannot take every connection of the pool.

interface Gate { promise: Promise<string>, open: (value: string) => void, fail: (err: Error) => void }
function gate (): Gate {
  let open!: (value: string) => void
  let fail!: (err: Error) => void
  const promise = new Promise<string>((resolve, reject) => { open = resolve; fail = reject })
  return { promise, open, fail }
}
const settle = async (): Promise<void> => { await new Promise((resolve) => setImmediate(resolve)) }

t.test('at most HEAVY_READS run at once per handle, the rest in turn, each handle on its own', async (t) => {
  const primary = {}
  const replica = {}
  const gates = Array.from({ length: HEAVY_READS + 3 }, gate)
  const started: number[] = []
  const alone: boolean[] = []
  const upTo = (n: number): number[] => Array.from({ length: n }, (_, i) => i)
  const reads = gates.map(async (g, n) => await heavyRead(primary, async (first) => { started.push(n); alone[n] = first; return await g.promise }))
  await settle()
  t.same(started, upTo(HEAVY_READS), `the first ${HEAVY_READS} run`)
  t.same(alone, upTo(HEAVY_READS).map((n) => n === 0), 'the first alone, the others beside it')
  t.same(heavyReadCounts(), { running: HEAVY_READS, waiting: 3 })

  const other = gate()
  let replicaAlone: boolean | undefined
  const onReplica = heavyRead(replica, async (first) => { replicaAlone = first; return await other.promise })
  await settle()
  t.same(heavyReadCounts(), { running: HEAVY_READS + 1, waiting: 3 }, 'another handle does not wait for this one')
  t.equal(replicaAlone, true, 'and is alone on its own handle')

  gates[1]!.open('one')
  t.equal(await reads[1], 'one')
  await settle()
  t.same(started, upTo(HEAVY_READS + 1), 'an ended read lets the next one start, in the order they came')
  gates[2]!.fail(new Error('statement timeout'))
  await t.rejects(reads[2]!, { message: 'statement timeout' }, 'a failed read fails its caller')
  await settle()
  t.same(started, upTo(HEAVY_READS + 2), 'and frees its slot')

  for (const [n, g] of gates.entries()) g.open(`read ${n}`)
  other.open('replica')
  t.same(await Promise.all(reads.filter((_, n) => n !== 2)), upTo(HEAVY_READS + 3).filter((n) => n !== 2).map((n) => n === 1 ? 'one' : `read ${n}`))
  t.equal(await onReplica, 'replica')
  t.same(heavyReadCounts(), { running: 0, waiting: 0 })
})

t.test('a read that starts beside another heavy read gets no parallel workers', async (t) => {
  const app = await build(t)
  const workers = async (): Promise<string> => await heavyReadWithMemory(app.db, '64MB', async (tx) => {
    const [row] = await queryRows<{ workers: string, memory: string }>(tx, sql`select current_setting('max_parallel_workers_per_gather') as workers, current_setting('work_mem') as memory`)
    t.equal(row!.memory, '64MB', 'the read has its memory')
    return row!.workers
  })
  const [server] = await queryRows<{ workers: string }>(app.db, sql`select current_setting('max_parallel_workers_per_gather') as workers`)
  // PGlite allows none; the PostgreSQL pass of the suite checks what changes.
  if ((process.env.TEST_DATABASE_URL ?? '') !== '') t.not(server!.workers, '0', 'the server allows workers')
  t.equal(await workers(), server!.workers, 'alone: as many as the server allows')
  const held = gate()
  const other = heavyRead(app.db, async () => await held.promise)
  await settle()
  t.equal(await workers(), '0', 'beside another: none')
  held.open('done')
  await other
  t.equal(await workers(), server!.workers, 'alone again: as many as the server allows')
})
