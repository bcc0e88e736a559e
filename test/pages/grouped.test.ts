import { sql } from 'drizzle-orm'
import t from 'tap'
import type { Database } from '../../src/db/client.js'
import { queryRows } from '../helpers/fixtures.js'
import { STRIDE } from '../../src/pages/anchors/anchor-set.js'
import { MAX_GROUPS } from '../../src/pages/grouped.js'
import { NEAR_START } from '../../src/pages/numbered.js'
import { BACKGROUND } from '../../src/db/heavy-reads.js'
import { anchorSetReads } from '../../src/pages/deep-page-reads.js'
import { createCollectionReader } from '../../src/pages/reader.js'
import { MESSAGE_COLLECTION } from '../../src/messages/collection.js'
import { rawRows, run, seedFromEnv } from '../helpers/exactness.js'
import { PROPERTY_SCALE } from '../helpers/scale.js'
import { watchDeepPageReads } from '../helpers/deep-page-reads.js'
import { deleteBySql, insertMessagesBySql, updateBySql, world, type World } from '../helpers/exactness-messages.js'

// Pages by subject and by priority located group by group (src/pages/grouped.ts, drizzle/0017), deep
// pages without reading anchors for them, and a descending page near the start always:
// compared with ORDER BY subject (or priority), id and count(*) after inserts, updates that move rows
// between groups and to and from NULL, deletes and cascades, in both orders, at the edges of the
// groups and past the end; and a table with more subjects than are walked.

const seed = seedFromEnv()
t.comment(`exactness seed ${seed} (replay with EXACTNESS_SEED=${seed})`)

const LIMITS = [1, 7, 25, 100]
/**
 * Pages that start on either side of a group's edge are read at every edge; those that start further
 * before it, to end on or across it, at every edge at TEST_PROPERTY_SCALE=3 (CI's PostgreSQL pass), at
 * a third of them by default.
 */
const FAR_EDGE_SHARE = Math.min(1, PROPERTY_SCALE / 3)

type GroupedSort = 'subject' | 'priority'

/**
 * Every page at the edges of the groups (and a few more), in both orders, against the reference; the
 * mismatches. Descending pages near the start are located too, so the edges there count as well.
 */
async function mismatches (w: World, reader: ReturnType<typeof createCollectionReader>, sort: GroupedSort = 'subject'): Promise<{ wrong: string[], pages: number }> {
  const wrong: string[] = []
  let pages = 0
  for (const order of ['asc', 'desc'] as const) {
    const rows = await rawRows<{ id: number, k: string | null }>(w.app,
      `SELECT id::int AS id, ${sort}::text AS k FROM messages ORDER BY ${sort} ${order === 'desc' ? 'DESC' : ''}, id`)
    const total = rows.length
    const offsets = new Set<number>([0, total - 1, total, total + 3])
    for (let i = 1; i < total; i++) {
      if (rows[i]!.k !== rows[i - 1]!.k) {
        for (const d of [-1, 0, 1]) offsets.add(i + d)
        for (const d of [-101, -25, -7]) if (w.rng.next() < FAR_EDGE_SHARE) offsets.add(i + d)
      }
    }
    for (let i = 0; i < 10; i++) offsets.add(w.rng.int(NEAR_START, total))
    for (const offset of [...offsets].filter((o) => o >= (order === 'desc' ? 0 : NEAR_START))) {
      const limit = w.rng.pick(LIMITS)
      pages++
      const page = await reader.read(w.app.db, {}, { page: 1, limit, offset, sort, order, cursor: null, filters: '', collection: 'messages' }, BACKGROUND)
      const got = (page.rows as Array<{ id: number }>).map((row) => Number(row.id))
      const want = rows.slice(offset, offset + limit).map((row) => row.id)
      if (got.join() !== want.join() || page.total !== total) {
        wrong.push(`${sort} ${order} offset ${offset} limit ${limit}: ${got.slice(0, 4).join()}… total ${page.total}, where ${want.slice(0, 4).join()}… total ${total}`)
      }
      const keys = rows.slice(offset, offset + limit).map((row) => row.k)
      if (JSON.stringify(page.keys) !== JSON.stringify(keys)) wrong.push(`${sort} ${order} offset ${offset} limit ${limit}: cursor keys differ`)
    }
  }
  return { wrong, pages }
}

t.test('pages by subject and by priority, located group by group, are exact after every kind of write', async (t) => {
  const w = await world(t, seed)
  const reader = createCollectionReader(MESSAGE_COLLECTION, { anchors: false })
  const vias = watchDeepPageReads(t)
  await insertMessagesBySql(w, 3000)
  const steps: Array<[string, () => Promise<void>]> = [
    ['after inserts', async () => {}],
    ['after updates (subjects moved, to and from NULL)', async () => { await updateBySql(w) }],
    ['after deletes and a cascade', async () => { await deleteBySql(w) }],
    ['after more inserts', async () => { await insertMessagesBySql(w, 400) }]
  ]
  for (const [label, write] of steps) {
    await write()
    for (const sort of ['subject', 'priority'] as const) {
      const before = vias.length
      const { wrong, pages } = await mismatches(w, reader, sort)
      t.strictSame(wrong.slice(0, 5), [], `${label}: ${pages} pages and totals as ORDER BY ${sort}, id and count(*) give them`)
      t.strictSame(vias.slice(before).filter((read) => read.via !== 'rank').map((read) => read.via), [], `${label}: every deep page by ${sort} located, none walked`)
    }
  }
})

t.test(`more than ${MAX_GROUPS} subjects: deep pages are walked instead, and exact`, async (t) => {
  const w = await world(t, seed + 1)
  const reader = createCollectionReader(MESSAGE_COLLECTION, { anchors: false })
  const vias = watchDeepPageReads(t)
  await insertMessagesBySql(w, 1200)
  // Each of the first MAX_GROUPS + 20 messages with a subject gets one of its own, the rest repeat them:
  // more subjects than are walked, whatever ids the seed gave.
  await run(w.app, `UPDATE messages m SET subject = 'many-' || r.n FROM (
    SELECT id, row_number() OVER (ORDER BY id) % ${MAX_GROUPS + 20} AS n FROM messages WHERE subject IS NOT NULL) r WHERE m.id = r.id`)
  const [{ subjects } = { subjects: 0 }] = await rawRows<{ subjects: number }>(w.app, 'SELECT count(DISTINCT subject)::int AS subjects FROM messages')
  t.ok(subjects > MAX_GROUPS, `${subjects} subjects`)
  const before = vias.length
  const { wrong, pages } = await mismatches(w, reader)
  t.strictSame(wrong.slice(0, 5), [], `${pages} pages and totals exact`)
  t.ok(vias.length > before && vias.slice(before).every((read) => read.via === 'offset'), 'every page walked OFFSET')
})

t.test('deep pages by subject are located at once and always, and start no read of anchors', async (t) => {
  const w = await world(t, seed + 2)
  // About 120 subjects seen once (one message in 20 has one), well within MAX_GROUPS whatever the seed.
  await insertMessagesBySql(w, 3000)
  // Anchors read one stride a statement: were a read started, it would end within the pages below.
  const reader = createCollectionReader(MESSAGE_COLLECTION, { anchorChunk: STRIDE })
  const vias = watchDeepPageReads(t)
  const anchorReads: unknown[] = []
  const listener = (message: unknown): void => { anchorReads.push(message) }
  anchorSetReads.subscribe(listener)
  t.teardown(() => { anchorSetReads.unsubscribe(listener) })
  const expected = (await rawRows<{ id: number }>(w.app, 'SELECT id::int AS id FROM messages ORDER BY subject, id')).map((row) => row.id)
  const read = async (offset: number): Promise<number[]> => {
    const page = await reader.read(w.app.db, {}, { page: 1, limit: 25, offset, sort: 'subject', order: 'asc', cursor: null, filters: '', collection: 'messages' }, BACKGROUND)
    return (page.rows as Array<{ id: number }>).map((row) => Number(row.id))
  }
  const offset = expected.length - 30
  t.strictSame(await read(offset), expected.slice(offset, offset + 25), 'the first deep page, near the end, is exact')
  t.strictSame(vias.map((v) => v.via), ['rank'], 'and located in the counters')
  const wrong: number[] = []
  for (let attempt = 0; attempt < 40; attempt++) {
    const at = NEAR_START + ((attempt * 97) % (expected.length - NEAR_START - 25))
    if ((await read(at)).join() !== expected.slice(at, at + 25).join()) wrong.push(at)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  t.strictSame(wrong, [], 'every later deep page is exact')
  t.ok(vias.length === 41 && vias.every((v) => v.via === 'rank'), 'and located in the counters too')
  t.strictSame(anchorReads, [], 'no read of the anchors of the result set was started')
})

// The counts a page locates itself in are split (drizzle/0019): the writers' slots in one partition,
// and what compaction folded into slot 0 in the other. With buckets in both, and in both at once, every
// located page is still exact.
t.test('located pages are exact with the counters split between the writers\' slots and the folded ones', async (t) => {
  const w = await world(t, seed + 3)
  const reader = createCollectionReader(MESSAGE_COLLECTION, { anchors: false })
  const vias = watchDeepPageReads(t)
  await insertMessagesBySql(w, 2000)
  await run(w.app, 'SELECT pagination_compact()')
  await updateBySql(w)
  await deleteBySql(w)
  await insertMessagesBySql(w, 300)
  // Moved between priorities and counted in one transaction: the service's own compaction, whenever it
  // runs, skips the rows this transaction holds, so the writers' partition is seen with them.
  const split = await w.app.db.transaction(async (tx) => {
    await tx.execute(sql`UPDATE messages SET priority = CASE priority WHEN 'low' THEN 'high'::message_priority ELSE 'low' END
      WHERE id IN (SELECT id FROM messages ORDER BY id LIMIT 40)`)
    const [row] = await queryRows<{ folded: number, written: number }>(tx as unknown as Database, sql`SELECT
      (SELECT count(*)::int FROM pagination_counts_folded WHERE table_name = 'messages' AND dim <> 'total') AS folded,
      (SELECT count(*)::int FROM pagination_counts_written WHERE table_name = 'messages' AND dim <> 'total') AS written`)
    return row!
  })
  t.ok(split.folded > 0 && split.written > 0, `bucket rows folded (${split.folded}) and in writers' slots (${split.written})`)
  const wrong: string[] = []
  for (const [sort, column] of [['id', 'id'], ['createdAt', 'created_at']] as const) {
    for (const order of ['asc', 'desc'] as const) {
      const ids = (await rawRows<{ id: number }>(w.app, `SELECT id::int AS id FROM messages ORDER BY ${column} ${order === 'desc' ? 'DESC' : ''}, id`)).map((row) => row.id)
      for (let i = 0; i < 12; i++) {
        const offset = w.rng.int(NEAR_START, ids.length + 2)
        const limit = w.rng.pick(LIMITS)
        const page = await reader.read(w.app.db, {}, { page: 1, limit, offset, sort, order, cursor: null, filters: '', collection: 'messages' }, BACKGROUND)
        const got = (page.rows as Array<{ id: number }>).map((row) => Number(row.id))
        if (got.join() !== ids.slice(offset, offset + limit).join() || page.total !== ids.length) wrong.push(`${sort} ${order} offset ${offset} limit ${limit}: ${got.slice(0, 4).join()}… total ${page.total}`)
      }
    }
  }
  t.strictSame(wrong, [], 'pages by id and by created time, at random offsets, exact')
  for (const sort of ['subject', 'priority'] as const) {
    const { wrong, pages } = await mismatches(w, reader, sort)
    t.strictSame(wrong.slice(0, 5), [], `${pages} pages by ${sort}, located group by group, exact`)
  }
  t.strictSame(vias.filter((read) => read.via !== 'rank').map((read) => read.via), [], 'every deep page located, none walked')
})
