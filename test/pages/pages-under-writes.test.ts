import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { BACKGROUND, HEAVY_READS, HEAVY_READS_PER_CLIENT, heavyReadCounts } from '../../src/db/heavy-reads.js'
import { createCollectionReader } from '../../src/pages/reader.js'
import { MESSAGE_COLLECTION } from '../../src/messages/collection.js'
import { rawRows, run, seedFromEnv } from '../helpers/exactness.js'
import { watchDeepPageReads } from '../helpers/deep-page-reads.js'
import { insertMessagesBySql, world } from '../helpers/exactness-messages.js'

// Deep pages read while another client writes (CONTRACT 7): each page and its total must be those of
// one snapshot. The rows written here sort after every row already there by subject (no subject:
// NULL keys come last, and among them a higher id comes later), so a full page of the earlier rows is
// the same page at every moment of the writes, and its total is one of the counts the table had.

const seed = seedFromEnv()
t.comment(`exactness seed ${seed} (replay with EXACTNESS_SEED=${seed})`)

const count = async (w: Awaited<ReturnType<typeof world>>): Promise<number> =>
  Number((await rawRows<{ n: number }>(w.app, 'SELECT count(*)::int AS n FROM messages'))[0]!.n)

// Without anchors (they follow these writes: test/pages/anchors-follow.test.ts), every deep page by
// subject is located group by group (src/pages/grouped.ts); with no groups to locate it in, it walks OFFSET.
const { groupRanked: _located, ...unlocated } = MESSAGE_COLLECTION
const READERS = {
  rank: createCollectionReader(MESSAGE_COLLECTION, { anchors: false }),
  offset: createCollectionReader(unlocated, { anchors: false })
}

for (const via of ['rank', 'offset'] as const) {
  t.test(`deep pages by subject read during writes are each the page of one snapshot (${via === 'rank' ? 'located by group' : 'walked'})`, async (t) => {
    const w = await world(t, seed)
    await insertMessagesBySql(w, 3000)
    const before = await count(w)
    const expected = (await rawRows<{ id: number }>(w.app, 'SELECT id::int AS id FROM messages ORDER BY subject, id')).map((row) => Number(row.id))
    const reader = READERS[via]
    const vias = watchDeepPageReads(t)

    // The writer keeps pace with the reads, whatever the speed of either: at most one row for each page
    // begun, and one ahead, so that it neither finishes first nor floods the table.
    const state = { writing: true, written: 0, pages: 0 }
    const writer = (async () => {
      while (state.writing) {
        if (state.written > state.pages) {
          await sleep(1)
          continue
        }
        await run(w.app, `INSERT INTO messages (id, content, subject, priority, author_id) OVERRIDING SYSTEM VALUE
        SELECT max(id) + 1, 'written meanwhile', NULL, 'normal', (SELECT min(id) FROM users) FROM messages`)
        state.written++
      }
    })().finally(() => { state.writing = false })
    /** Waits until a row has been written since `seen` rows were. */
    const writtenSince = async (seen: number): Promise<void> => {
      while (state.written <= seen) {
        if (!state.writing) throw new Error(`the writer stopped after ${state.written} rows`)
        await sleep(1)
      }
    }

    const wrong: string[] = []
    const totals: number[] = []
    // Walks are heavy reads (src/db/heavy-reads.ts): these, asked for by no request, run as background
    // work, a client's share of the places at a time (never refused); the rest wait for a place.
    const most = { running: 0, waiting: 0 }
    const sampler = setInterval(() => {
      const { running, waiting } = heavyReadCounts()
      most.running = Math.max(most.running, running)
      most.waiting = Math.max(most.waiting, waiting)
    }, 1)
    const readAt = async (i: number): Promise<void> => {
      state.pages++
      const limit = 10 + (i % 21)
      // Alternately near the end (walked from the end of the index) and nearer the start.
      const offset = i % 2 === 0 ? before - limit - ((i * 37) % 600) : 1000 + ((i * 53) % 700)
      const page = await reader.read(w.app.db, {}, { page: 1, limit, offset, sort: 'subject', order: 'asc', cursor: null, filters: '', collection: 'messages' }, BACKGROUND)
      const ids = (page.rows as Array<{ id: number }>).map((row) => Number(row.id))
      const want = expected.slice(offset, offset + limit)
      totals.push(page.total)
      if (ids.join() !== want.join()) wrong.push(`offset ${offset}, limit ${limit}: ids ${ids.slice(0, 3).join()}… where ${want.slice(0, 3).join()}… (total ${page.total})`)
    }
    try {
    // One page at a time, each between writes, then rounds of more pages at once than may walk at once.
      const together = HEAVY_READS + 4
      for (let i = 0; i < 40; i++) {
        const seen = state.written
        await readAt(i)
        await writtenSince(seen)
      }
      for (let round = 0; round < 4; round++) await Promise.all(Array.from({ length: together }, async (_, n) => { await readAt(40 + round * together + n) }))
    } finally {
      clearInterval(sampler)
      state.writing = false
      await writer
    }
    const after = await count(w)
    t.ok(state.written > 10, `${state.written} rows written during the reads`)
    t.strictSame(wrong.slice(0, 5), [], 'every page is the same page of the rows that were there')
    t.strictSame(totals.filter((total) => total < before || total > after), [], `every total is a count the table had: ${before} to ${after}`)
    t.ok(totals.some((total) => total > before), 'and the totals saw the writes')
    const same = vias.filter((read) => read.via === via).length
    t.equal(same, vias.length, `all ${vias.length} pages read via ${via}`)
    if (via === 'offset') {
      t.ok(most.running >= 1 && most.running <= HEAVY_READS_PER_CLIENT, `at most ${HEAVY_READS_PER_CLIENT} walks at once (${most.running} seen)`)
      t.ok(most.waiting > 0, `the others waited for a slot (${most.waiting} at most)`)
    }
  })
}
