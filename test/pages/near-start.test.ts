import t from 'tap'
import { MESSAGE_COLLECTION } from '../../src/messages/collection.js'
import { NEAR_START } from '../../src/pages/numbered.js'
import { BACKGROUND } from '../../src/db/heavy-reads.js'
import { createCollectionReader } from '../../src/pages/reader.js'
import { lit, rawRows, run, seedFromEnv } from '../helpers/exactness.js'
import { deleteBySql, insertMessagesBySql, updateBySql, world, type World } from '../helpers/exactness-messages.js'

// Descending pages near the start of the sorts with long runs of ties (priority, subject), which are
// sought run by run from before the first row (src/pages/numbered.ts startSoughtSql) rather than
// sorted: unfiltered and under a priority filter, with NULL subjects first, compared with the
// database's ORDER BY … DESC, id and count(*) at every run's edge and across the whole range, after
// inserts, updates that move rows between runs and to and from NULL, and deletes with a cascade.

const seed = seedFromEnv()
t.comment(`exactness seed ${seed} (replay with EXACTNESS_SEED=${seed})`)

interface Shape { sort: 'subject' | 'priority', priority?: string }
const SHAPES: Shape[] = [{ sort: 'subject' }, { sort: 'priority' }, { sort: 'subject', priority: 'normal' }]
const LIMITS = [1, 7, 25, 100]

async function mismatches (w: World, reader: ReturnType<typeof createCollectionReader>, shape: Shape): Promise<{ wrong: string[], pages: number }> {
  const where = shape.priority === undefined ? 'true' : `priority = ${lit(shape.priority)}`
  const rows = await rawRows<{ id: number, k: string | null }>(w.app,
    `SELECT id::int AS id, ${shape.sort}::text AS k FROM messages WHERE ${where} ORDER BY ${shape.sort} DESC, id`)
  const offsets = new Set<number>([0, 1])
  for (let i = 1; i < Math.min(rows.length, NEAR_START + 1); i++) {
    if (rows[i]!.k !== rows[i - 1]!.k) for (const d of [-7, -1, 0, 1]) offsets.add(i + d)
  }
  for (let i = 0; i < 40; i++) offsets.add(w.rng.int(0, NEAR_START))
  const wrong: string[] = []
  let pages = 0
  for (const offset of [...offsets].filter((o) => o >= 0 && o < NEAR_START)) {
    const limit = w.rng.pick(LIMITS)
    pages++
    const values = shape.priority === undefined ? {} : { priority: shape.priority }
    const page = await reader.read(w.app.db, values, { page: 1, limit, offset, sort: shape.sort, order: 'desc', cursor: null, filters: '', collection: 'messages' }, BACKGROUND)
    const got = (page.rows as Array<{ id: number }>).map((row) => Number(row.id))
    const want = rows.slice(offset, offset + limit)
    if (got.join() !== want.map((row) => row.id).join() || page.total !== rows.length) {
      wrong.push(`${JSON.stringify(shape)} offset ${offset} limit ${limit}: ${got.slice(0, 4).join()}… total ${page.total}, where ${want.slice(0, 4).map((row) => row.id).join()}… total ${rows.length}`)
    }
    if (JSON.stringify(page.keys) !== JSON.stringify(want.map((row) => row.k))) wrong.push(`${JSON.stringify(shape)} offset ${offset} limit ${limit}: cursor keys differ`)
  }
  return { wrong, pages }
}

t.test('descending pages near the start, sought run by run, are exact after every kind of write', async (t) => {
  const w = await world(t, seed)
  const reader = createCollectionReader(MESSAGE_COLLECTION, { anchors: false })
  await insertMessagesBySql(w, 1500)
  // Short runs at the start of the order: a few subjects high in it, each on a handful of rows, and
  // one that is the word NULL, which must not be read as a null key.
  await run(w.app, "UPDATE messages SET subject = 'zz-' || (id % 3) WHERE id IN (SELECT id FROM messages WHERE subject IS NOT NULL ORDER BY id LIMIT 12)")
  await run(w.app, "UPDATE messages SET subject = 'NULL' WHERE id IN (SELECT id FROM messages ORDER BY id DESC LIMIT 30)")
  const steps: Array<[string, () => Promise<void>]> = [
    ['after inserts', async () => {}],
    ['after updates (runs moved, to and from NULL)', async () => { await updateBySql(w) }],
    ['after deletes and a cascade', async () => { await deleteBySql(w) }],
    ['after more inserts', async () => { await insertMessagesBySql(w, 300) }]
  ]
  for (const [label, write] of steps) {
    await write()
    for (const shape of SHAPES) {
      const { wrong, pages } = await mismatches(w, reader, shape)
      t.strictSame(wrong.slice(0, 5), [], `${label}: ${pages} pages of ${JSON.stringify(shape)} and their totals as the database orders and counts them`)
    }
  }
})
