import t from 'tap'
import { BACKGROUND } from '../../src/db/heavy-reads.js'
import { createCollectionReader } from '../../src/pages/reader.js'
import { MESSAGE_COLLECTION } from '../../src/messages/collection.js'
import { reachFor } from '../../src/pages/reach.js'
import { MAX_LIMIT } from '../../src/schemas/pagination.js'
import { STRIDE } from '../../src/pages/anchors/anchor-set.js'
import { rawRows, seedFromEnv } from '../helpers/exactness.js'
import { NOT_HUNG_MS } from '../helpers/bounded.js'
import { watchDeepPageReads } from '../helpers/deep-page-reads.js'
import { insertMessagesBySql, world } from '../helpers/exactness-messages.js'

// A page's statement reads as many rows beyond its start as the smallest of a few constant sizes that
// holds the page (src/pages/reach.ts). A size one row too small loses the page's last row, so the pages
// here sit on each size's edge.

const seed = seedFromEnv()

t.test('reachFor: the smallest size that holds the rows, and never more than the most', async (t) => {
  t.equal(reachFor(1, STRIDE - 1 + MAX_LIMIT), 32)
  t.equal(reachFor(32, STRIDE - 1 + MAX_LIMIT), 32)
  t.equal(reachFor(33, STRIDE - 1 + MAX_LIMIT), 64)
  t.equal(reachFor(65, STRIDE - 1 + MAX_LIMIT), 128)
  t.equal(reachFor(256, STRIDE - 1 + MAX_LIMIT), 256)
  t.equal(reachFor(257, STRIDE - 1 + MAX_LIMIT), 320)
  t.equal(reachFor(321, STRIDE - 1 + MAX_LIMIT), 355, 'past the last size below the most: the most')
  t.equal(reachFor(355, STRIDE - 1 + MAX_LIMIT), 355)
  t.equal(reachFor(26, MAX_LIMIT + 1), 32, 'a cursor page of 25 and the row after it')
  t.equal(reachFor(65, MAX_LIMIT + 1), 101)
  t.equal(reachFor(100, MAX_LIMIT), 100)
  t.equal(reachFor(577, 611), 611)
  for (let most = 1; most <= 700; most++) {
    for (let needed = 1; needed <= most; needed++) {
      const reach = reachFor(needed, most)
      if (reach < needed || reach > most) {
        t.fail(`reachFor(${needed}, ${most}) = ${reach}`)
        return
      }
    }
  }
  t.pass('for every most up to 700, every need up to it gets a size between the need and the most')
})

t.test('pages on the edge of every size are exact: from anchors, by cursor and from the counters', async (t) => {
  const w = await world(t, seed)
  // Deep pages (offset 1,000 or more) come from anchors: five strides, and room for a page after the last.
  await insertMessagesBySql(w, 5 * STRIDE + 400)
  const reader = createCollectionReader(MESSAGE_COLLECTION)
  // The counters serve id and subject pages, so anchors are read for them only with those ways off.
  const anchored = createCollectionReader(MESSAGE_COLLECTION, { off: ['located', 'grouped'] })
  const vias = watchDeepPageReads(t)
  const expected = {
    id: (await rawRows<{ id: number }>(w.app, 'SELECT id::int AS id FROM messages ORDER BY id')).map((row) => Number(row.id)),
    subject: (await rawRows<{ id: number }>(w.app, 'SELECT id::int AS id FROM messages ORDER BY subject, id')).map((row) => Number(row.id))
  }
  const read = async (sort: 'id' | 'subject', offset: number, limit: number, by = anchored): Promise<number[]> => {
    const page = await by.read(w.app.db, {}, { page: 1, limit, offset, sort, order: 'asc', cursor: null, filters: '', collection: 'messages' }, BACKGROUND)
    return (page.rows as Array<{ id: number }>).map((row) => Number(row.id))
  }

  // Anchors are read in the background after the first deep page of each sort asks for them; until the
  // whole set is read, pages they do not reach yet wait for them.
  for (const sort of ['id', 'subject'] as const) {
    let whole = false
    // Bounded by a time far above any machine's pace, not by a number of reads.
    const deadline = performance.now() + NOT_HUNG_MS
    while (performance.now() < deadline && !whole) {
      const before = vias.length
      await read(sort, 4 * STRIDE + 5, 10)
      whole = vias.slice(before).some((v) => v.via === 'anchor' && v.partial !== true)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    const from = vias.length
    const wrong: string[] = []
    // The skip after the anchor plus the limit on either side of each size: 31, 32, 33, 63, ... 355.
    for (const edge of [32, 64, 128, 192, 256, 320]) {
      for (const needed of [edge - 1, edge, edge + 1]) {
        for (const limit of [1, 25, MAX_LIMIT]) {
          const skip = needed - limit
          if (skip < 0 || skip >= STRIDE) continue
          const offset = 4 * STRIDE + skip
          const got = await read(sort, offset, limit)
          const want = expected[sort].slice(offset, offset + limit)
          if (JSON.stringify(got) !== JSON.stringify(want)) wrong.push(`${sort} offset ${offset} limit ${limit}: ${JSON.stringify(got.slice(-2))} (want ${JSON.stringify(want.slice(-2))})`)
        }
      }
    }
    t.strictSame(wrong, [], `${sort}: every page on a size's edge is the table's page`)
    t.ok(vias.length > from && vias.slice(from).every((v) => v.via === 'anchor'), `${sort}: and every one came from the anchors`)
  }

  // By cursor: the page and the row after it (which tells whether more follow) on each side of a size.
  const wrong: string[] = []
  for (const limit of [30, 31, 32, 63, 64, 65, MAX_LIMIT]) {
    const after = expected.id[1000]!
    const page = await reader.read(w.app.db, {}, { page: 1, limit, offset: 0, sort: 'id', order: 'asc', cursor: { key: null, id: after, direction: 'after' }, filters: '', collection: 'messages' }, BACKGROUND)
    const got = (page.rows as Array<{ id: number }>).map((row) => Number(row.id))
    const want = expected.id.slice(1001, 1001 + limit)
    if (JSON.stringify(got) !== JSON.stringify(want) || page.after !== (expected.id.length > 1001 + limit)) wrong.push(`cursor limit ${limit}`)
  }
  t.strictSame(wrong, [], 'cursor pages of every size are exact, and know whether more follow')

  // From the counters: a row created before each page makes the anchors out of date.
  const located: string[] = []
  for (const limit of [31, 32, 33, 64, 65, MAX_LIMIT]) {
    await insertMessagesBySql(w, 1)
    const ids = (await rawRows<{ id: number }>(w.app, 'SELECT id::int AS id FROM messages ORDER BY id')).map((row) => Number(row.id))
    const from = vias.length
    const got = await read('id', 1500, limit, reader)
    if (JSON.stringify(got) !== JSON.stringify(ids.slice(1500, 1500 + limit))) located.push(`limit ${limit}`)
    if (vias.slice(from).some((v) => v.via !== 'rank')) located.push(`limit ${limit}: ${vias.slice(from).map((v) => v.via).join()}`)
  }
  t.strictSame(located, [], 'pages located in the order-statistic index at every size are exact')
})
