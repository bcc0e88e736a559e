import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { BACKGROUND } from '../../src/db/heavy-reads.js'
import { createCollectionReader } from '../../src/pages/reader.js'
import { deepPageReads, type DeepPageRead, type DeepPageVia } from '../../src/pages/deep-page-reads.js'
import { MESSAGE_COLLECTION } from '../../src/messages/collection.js'
import { AnchorCache, anchorBytes, anchorFor, STRIDE, type Anchors } from '../../src/pages/anchors/anchor-set.js'
import { lit, rawRows, run, seedFromEnv } from '../helpers/exactness.js'
import { watchDeepPageReads } from '../helpers/deep-page-reads.js'
import { deleteBySql, insertMessagesBySql, updateBySql, world, type World } from '../helpers/exactness-messages.js'
import { scrape } from '../helpers/live.js'
import { PROPERTY_SCALE } from '../helpers/scale.js'

// Deep pages read from the anchors of their result set (src/pages/anchors/anchor-set.ts): every sort, order and
// counted filter, compared with a naive ORDER BY ... OFFSET, before the anchors exist, once they do,
// and after writes that make them out of date.

const seed = seedFromEnv()
t.comment(`exactness seed ${seed} (replay with EXACTNESS_SEED=${seed})`)

const anchors = (n: number, version = 1): Anchors => ({
  version,
  total: n * STRIDE + 10,
  keys: Array.from({ length: n }, (_, i) => i % 2 === 0 ? null : `key ${i}`),
  ids: Float64Array.from({ length: n }, (_, i) => (i + 1) * 1000)
})

t.test('anchorFor: the anchor at or before the offset, and the rows to skip after it', async (t) => {
  const set = anchors(3)
  t.equal(anchorFor(set, 0), undefined, 'the first stride has no anchor before it')
  t.equal(anchorFor(set, STRIDE - 1), undefined)
  t.same(anchorFor(set, STRIDE), { position: { key: null, id: 1000 }, skip: 0 }, 'the row after the first anchor')
  t.same(anchorFor(set, 2 * STRIDE + 17), { position: { key: 'key 1', id: 2000 }, skip: 17 })
  t.same(anchorFor(set, 4 * STRIDE - 1), { position: { key: null, id: 3000 }, skip: STRIDE - 1 }, 'the last stride')
  t.equal(anchorFor(set, 4 * STRIDE), undefined, 'past the last anchor: none')
  t.equal(anchorBytes(anchors(0)), 200)
  t.equal(anchorBytes(anchors(2)), 200 + 2 * 16 + 8 + 24 + 'key 1'.length)
})

t.test('AnchorCache: bounded by bytes, least recently used out, retired only by a newer version', async (t) => {
  const one = anchorBytes(anchors(100))
  const cache = new AnchorCache(2 * one + 10)
  for (const key of ['a', 'b']) {
    cache.refresh(key, async () => anchors(100))
    await cache.settled()
  }
  t.ok(cache.get('a') !== undefined, 'a is held (and now the most recently used)')
  cache.refresh('c', async () => anchors(100))
  await cache.settled()
  t.equal(cache.get('b'), undefined, 'b, the least recently used, made room for c')
  t.ok(cache.get('a') !== undefined && cache.get('c') !== undefined)
  t.equal(cache.heldBytes, 2 * one)
  cache.retire('a', 1)
  t.ok(cache.get('a') !== undefined, 'a read at the same version keeps it')
  cache.retire('a', 0)
  t.ok(cache.get('a') !== undefined, 'an older version (a replica behind) keeps it')
  cache.retire('a', 2)
  t.equal(cache.get('a'), undefined, 'a newer version retires it')
  t.equal(cache.heldBytes, one)
  cache.refresh('huge', async () => anchors(1000))
  await cache.settled()
  t.equal(cache.get('huge'), undefined, 'a set larger than the whole bound is not kept')
})

t.test('AnchorCache: one read at a time per key, failed reads keep nothing, and reads are paced', async (t) => {
  let now = 0
  const cache = new AnchorCache(1 << 20, () => now)
  let reads = 0
  let release = (): void => {}
  const slow = async (): Promise<Anchors> => {
    reads++
    await new Promise<void>((resolve) => { release = resolve })
    now += 100
    return anchors(2, reads)
  }
  const first = cache.refresh('k', slow)
  t.ok(first instanceof Promise, 'the read under way is returned, for a page to wait on')
  t.equal(cache.refresh('k', slow), first, 'a second refresh while one runs starts nothing and returns the same read')
  t.equal(reads, 1)
  release()
  await cache.settled()
  t.equal(cache.get('k')?.version, 1)
  now += 899
  t.equal(cache.refresh('k', slow), undefined, 'within nine times the last read\'s 100 ms: not read again, nothing to wait on')
  t.equal(reads, 1)
  now += 1
  cache.refresh('k', slow)
  t.equal(reads, 2, 'after it: read again')
  release()
  await cache.settled()
  t.equal(cache.get('k')?.version, 2)
  cache.refresh('other', async () => { throw new Error('the database went away') })
  cache.refresh('write', async () => undefined)
  await cache.settled()
  t.equal(cache.get('other'), undefined, 'a failed read stores nothing')
  t.equal(cache.get('write'), undefined, 'nor does one a write interrupted')
})

t.test('AnchorCache: the parts of a set being read are held until the read ends, and pages learn when each arrives', async (t) => {
  const cache = new AnchorCache(1 << 20)
  t.equal(cache.progress('k'), undefined, 'no read under way: nothing to wait for')
  let publish: (part: Anchors) => void = () => {}
  let finish: (set: Anchors | undefined) => void = () => {}
  cache.refresh('k', async (p) => {
    publish = p
    return await new Promise<Anchors | undefined>((resolve) => { finish = resolve })
  })
  const first = cache.progress('k')
  t.ok(first instanceof Promise, 'a read under way: a page can wait for its next part')
  t.equal(cache.progress('k'), first, 'every waiting page waits for the same part')
  publish({ ...anchors(1), total: null })
  await first
  t.same([cache.get('k')?.total, cache.get('k')?.ids.length], [null, 1], 'the first part is held, without a total')
  const second = cache.progress('k')
  t.not(second, first, 'then the next part is waited for')
  publish({ ...anchors(2), total: null })
  await second
  t.equal(cache.get('k')?.ids.length, 2, 'the next part replaces it')
  const last = cache.progress('k')
  finish(anchors(3))
  await last
  await cache.settled()
  t.same([cache.get('k')?.total, cache.get('k')?.ids.length], [3 * STRIDE + 10, 3], 'the whole set replaces its parts')
  t.equal(cache.progress('k'), undefined, 'the read has ended')
  publish({ ...anchors(1), total: null })
  t.equal(cache.get('k')?.ids.length, 3, 'a part published after its read ended is ignored')

  let publishCut: (part: Anchors) => void = () => {}
  let cut: () => void = () => {}
  cache.refresh('cut', async (p) => {
    publishCut = p
    await new Promise<void>((resolve) => { cut = resolve })
    return undefined
  })
  const part = cache.progress('cut')
  publishCut({ ...anchors(1), total: null })
  await part
  t.equal(cache.get('cut')?.total, null, 'a part is held while its read runs')
  cut()
  await cache.settled()
  t.equal(cache.get('cut'), undefined, 'a read a write cut short leaves none of its parts')
})

// --- Through the API, on a real database ---

const SORTS = { id: 'id', createdAt: 'created_at', subject: 'subject', priority: 'priority' } as const

interface Combination { params: Record<string, string>, where: string, sort: keyof typeof SORTS, desc: boolean }

function combinations (): Combination[] {
  const out: Combination[] = []
  const filters: Array<{ params: Record<string, string>, where: string }> = [{ params: {}, where: 'TRUE' }, { params: { priority: 'high' }, where: "priority = 'high'" }]
  for (const filter of filters) {
    for (const sort of Object.keys(SORTS) as Array<keyof typeof SORTS>) {
      for (const desc of [false, true]) out.push({ params: filter.params, where: filter.where, sort, desc })
    }
  }
  return out
}

/** Records how each deep page of the test's reads was located. */
function watchDeepPages (t: Test): DeepPageVia[] {
  const seen: DeepPageVia[] = []
  const listener = (message: unknown): void => { seen.push((message as DeepPageRead).via) }
  deepPageReads.subscribe(listener)
  t.teardown(() => { deepPageReads.unsubscribe(listener) })
  return seen
}

async function reference (w: World, c: Combination): Promise<number[]> {
  const order = c.sort === 'id' ? `id ${c.desc ? 'DESC' : 'ASC'}` : `${SORTS[c.sort]} ${c.desc ? 'DESC' : 'ASC'}, id ASC`
  const rows = await rawRows<{ id: number }>(w.app, `SELECT id::int AS id FROM messages WHERE ${c.where} ORDER BY ${order}`)
  return rows.map((r) => Number(r.id))
}

async function page (w: World, c: Combination, number: number, limit: number): Promise<{ ids: number[], total: number }> {
  const query = new URLSearchParams({ ...c.params, sort: c.sort, order: c.desc ? 'desc' : 'asc', page: String(number), limit: String(limit) })
  const res = await w.app.inject({ method: 'GET', url: `/v2/messages?${query.toString()}` })
  if (res.statusCode !== 200) throw new Error(`${query.toString()}: ${res.statusCode} ${res.body}`)
  const body = res.json() as { data: Array<{ id: number }>, pagination: { total: number } }
  return { ids: body.data.map((m) => m.id), total: body.pagination.total }
}

/**
 * Of the deep pages at the first limit, every one at TEST_PROPERTY_SCALE=3 (CI's PostgreSQL pass), every
 * third by default; at the other limits every fifth page, every fifteenth by default.
 */
const FIRST_STEP = Math.max(1, Math.round(3 / PROPERTY_SCALE))
const OTHER_STEP = 5 * FIRST_STEP

/**
 * Every deep page of each combination at the first limit (every FIRST_STEP-th), then a sample at the
 * others, every OTHER_STEP-th (pages at offset 1,000 or more, the last partial page and the one past the
 * end included).
 * Each check uses limits of its own, so that no page comes from the page cache. Returns the mismatches.
 */
async function checkDeep (w: World, label: string, limits: readonly number[]): Promise<string[]> {
  const problems: string[] = []
  for (const c of combinations()) {
    const expected = await reference(w, c)
    for (const limit of limits) {
      const first = Math.floor(1000 / limit) + 1
      const last = Math.ceil(expected.length / limit) + 1
      const step = limit === limits[0] ? FIRST_STEP : OTHER_STEP
      for (let n = first; n <= last; n += n + step > last && n < last ? last - n : step) {
        const got = await page(w, c, n, limit)
        const want = expected.slice((n - 1) * limit, n * limit)
        if (got.total !== expected.length || JSON.stringify(got.ids) !== JSON.stringify(want)) {
          problems.push(`${label}: ${JSON.stringify(c)} page ${n} limit ${limit}: total ${got.total} (want ${expected.length}), ids ${JSON.stringify(got.ids.slice(0, 4))}… (want ${JSON.stringify(want.slice(0, 4))}…)`)
        }
      }
    }
  }
  return problems
}

/** Asks for one deep page of each combination until every one was read from anchors (bounded). */
async function awaitAnchors (t: Test, w: World, seen: DeepPageVia[]): Promise<void> {
  for (const c of combinations()) {
    let anchored = false
    for (let attempt = 0; attempt < 100 && !anchored; attempt++) {
      const before = seen.length
      // A page just past offset 1,000, at a limit not asked for before, so that the page cache cannot answer it.
      const limit = 40 + attempt
      await page(w, c, Math.ceil(1000 / limit) + 1, limit)
      anchored = seen.slice(before).includes('anchor')
      if (!anchored) await sleep(20)
    }
    t.ok(anchored, `${JSON.stringify(c)}: read from anchors once they are read`)
  }
}

t.test('deep pages are exact before, with and after anchors, whatever writes', async (t) => {
  // The counters serve the sorts by id, created time, subject and priority: anchors are read for
  // their pages only with those ways off, as a bench sitting turns them off (src/pages/README.md).
  const w = await world(t, seed, { pageStrategiesOff: ['located', 'grouped'] })
  await insertMessagesBySql(w, 5600)
  // A subject with a quote, and one that is the word NULL, which must not be read as a null key.
  await run(w.app, `UPDATE messages SET subject = ${lit("it's")} WHERE id IN (SELECT id FROM messages ORDER BY id LIMIT 300)`)
  await run(w.app, "UPDATE messages SET subject = 'NULL' WHERE id IN (SELECT id FROM messages ORDER BY id DESC LIMIT 300)")
  const seen = watchDeepPages(t)

  t.strictSame((await checkDeep(w, 'before any anchors', [25, 7, 100])).slice(0, 5), [], 'exact while the anchors are being read')
  await awaitAnchors(t, w, seen)
  // How long each result set went without its anchors, for operators: every sort's read, whole.
  const metrics = await scrape(w.app)
  for (const sort of ['id', 'createdAt', 'subject', 'priority']) {
    t.match(metrics, new RegExp(`^pagination_anchor_read_seconds_count\\{table="messages",sort="${sort}",outcome="complete"\\} [1-9]`, 'm'), `the reads of ${sort}'s anchors on /metrics`)
  }
  const start = seen.length
  t.strictSame((await checkDeep(w, 'from anchors', [24, 9, 99])).slice(0, 5), [], 'exact from anchors')
  const vias = seen.slice(start)
  t.ok(vias.filter((via) => via === 'anchor').length > vias.length * 0.9, `${vias.filter((via) => via === 'anchor').length} of ${vias.length} deep pages from anchors (the rest in the last stride)`)

  // Writes of every kind by SQL, which the service learns of only from the table's version.
  await insertMessagesBySql(w, 600)
  await deleteBySql(w)
  await updateBySql(w)
  t.strictSame((await checkDeep(w, 'after writes', [23, 11, 98])).slice(0, 5), [], 'exact right after the writes, from out-of-date anchors')
  await awaitAnchors(t, w, seen)
  t.strictSame((await checkDeep(w, 'from anchors read again', [22, 13, 97])).slice(0, 5), [], 'exact from the anchors read again')
})

// Anchors read 256 rows a statement, so that 5,600 rows take 22 of them and pages arrive while they run.
// Read for a collection whose subject pages have no groups to be located in (those are, as they wait:
// test/pages/grouped.test.ts), so that every one of them waits for its anchors.
t.test('anchors still being read serve the pages they reach, exactly, and a write retires them', async (t) => {
  const w = await world(t, seed)
  await insertMessagesBySql(w, 5600)
  const { groupRanked: _located, ...unlocated } = MESSAGE_COLLECTION
  const reader = createCollectionReader(unlocated, { anchorChunk: STRIDE })
  const reads = watchDeepPageReads(t)
  const at = async (c: Combination, offset: number, limit: number): Promise<{ ids: number[], total: number }> => {
    const values = c.params.priority === undefined ? {} : { priority: c.params.priority }
    const result = await reader.read(w.app.db, values, { page: 1, limit, offset, sort: c.sort, order: c.desc ? 'desc' : 'asc', cursor: null, filters: '', collection: 'messages' }, BACKGROUND)
    return { ids: (result.rows as Array<{ id: number }>).map((row) => Number(row.id)), total: result.total }
  }
  const mismatches = async (c: Combination, offsets: number[], limit: number): Promise<string[]> => {
    const expected = await reference(w, c)
    const found = await Promise.all(offsets.map(async (offset) => ({ offset, got: await at(c, offset, limit) })))
    return found.filter(({ offset, got }) => got.total !== expected.length || JSON.stringify(got.ids) !== JSON.stringify(expected.slice(offset, offset + limit)))
      .map(({ offset, got }) => `${JSON.stringify(c)} offset ${offset}: total ${got.total} (want ${expected.length}), ids ${JSON.stringify(got.ids.slice(0, 3))}…`)
  }
  const deepOffsets = (total: number, step: number): number[] => Array.from({ length: Math.ceil((total - 1000) / step) }, (_, i) => 1000 + i * step)

  for (const c of [{ params: {}, where: 'TRUE', sort: 'subject', desc: false }, { params: { priority: 'normal' }, where: "priority = 'normal'", sort: 'subject', desc: true }] as Combination[]) {
    // A sort without counters waits for the anchors that reach its page: the first parts do.
    const before = reads.length
    t.strictSame(await mismatches(c, [1000], 25), [], `${JSON.stringify(c)}: the first deep page is exact`)
    t.same(reads.slice(before).map((read) => [read.via, read.partial]), [['anchor', true]], 'and read from the anchors read so far')
    // Every deep page at once while the rest is read: from the parts, by waiting, or from the whole set.
    const total = (await reference(w, c)).length
    t.strictSame((await mismatches(c, deepOffsets(total, 37), 19)).slice(0, 5), [], 'every deep page is exact while the anchors are read')
  }
  const partial = reads.filter((read) => read.partial === true).length
  t.ok(partial > 1, `${partial} pages read from anchors still being read`)

  // A write while a set is being read: its parts are of the old version and serve no page.
  const byId: Combination = { params: {}, where: 'TRUE', sort: 'id', desc: false }
  const c: Combination = { params: {}, where: 'TRUE', sort: 'createdAt', desc: true }
  await at(c, 1000, 10)
  await insertMessagesBySql(w, 40)
  await deleteBySql(w)
  t.strictSame((await mismatches(c, deepOffsets((await reference(w, c)).length, 53), 21)).slice(0, 5), [], 'exact after writes during the read')
  t.strictSame((await mismatches(byId, deepOffsets((await reference(w, byId)).length, 71), 30)).slice(0, 5), [], 'and by id, whose counters place pages the anchors do not reach yet')
})
