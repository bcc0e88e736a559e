import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { BACKGROUND } from '../../src/db/heavy-reads.js'
import { createCollectionReader } from '../../src/pages/reader.js'
import { MESSAGE_COLLECTION } from '../../src/messages/collection.js'
import type { PageRequest } from '../../src/pages/request.js'
import type { SortOrder } from '../../src/pages/cursor.js'
import { STRIDE } from '../../src/pages/anchors/anchor-set.js'
import { rawRows, run as run_, seedFromEnv } from '../helpers/exactness.js'
import { watchDeepPageReads } from '../helpers/deep-page-reads.js'
import { onPostgresServer } from '../helpers/database.js'
import { insertMessagesBySql, world } from '../helpers/exactness-messages.js'
import { BUCKET_LEVELS } from '../../src/db/triggers/counter-keys.js'

// A cold page's statement costs what PostgreSQL spends planning it plus what it spends running it.
// Planning one of these statements took longer than running it (1.4 ms at rest and 5.7 ms under load
// for a page located in the order-statistic index, against about 2 ms to run), so the statements of
// deep pages found from anchors, from the counters or by cursor must let PostgreSQL keep one generic
// plan after their first five executions (an OFFSET walk costs far more than its planning). Whether
// it does is a property of the SQL (a LIMIT given as a parameter was enough to lose it), and
// pg_prepared_statements shows it on the connection that ran them: one connection here.

const seed = seedFromEnv()
const RUNS = 8

type Plan = { statement: string, generic_plans: number, custom_plans: number }

type MessageSort = 'id' | 'createdAt' | 'subject'

// PostgreSQL only (PGlite runs each statement unnamed, so it keeps no plans): on PGlite's pass, on a
// throwaway cluster.
t.test('deep pages from counters, cursors and anchors are planned once, then run on their generic plans', async (t) => {
  await onPostgresServer(t)
  const w = await world(t, seed, { databasePoolSize: 1 })
  // Enough rows that a plan priced for an unknown LIMIT costs more than the custom ones: on 3,000
  // rows the statement that lost its generic plan on 1,000,000 kept it.
  await insertMessagesBySql(w, 20_000)
  const reader = createCollectionReader(MESSAGE_COLLECTION)
  // The counters serve these sorts: anchors are read for them only with those ways off.
  const fromAnchors = createCollectionReader(MESSAGE_COLLECTION, { off: ['located', 'grouped'] })
  const vias = watchDeepPageReads(t)
  const read = async (request: Partial<PageRequest<MessageSort>> & { sort: MessageSort, order: SortOrder }, values = {}, by = reader): Promise<void> => {
    await by.read(w.app.db, values, { page: 1, limit: 25, offset: 0, cursor: null, filters: '', collection: 'messages', ...request }, BACKGROUND)
  }

  // Under writes: deep pages by id and by created time are located through the order-statistic index.
  for (let run = 0; run < RUNS; run++) {
    await insertMessagesBySql(w, 1)
    const at = { offset: 1000 + 97 * run, limit: 10 + run }
    await read({ ...at, sort: 'id', order: 'asc' })
    await read({ ...at, sort: 'createdAt', order: 'desc' })
    await read({ ...at, sort: 'id', order: 'desc' }, { priority: 'normal' })
  }
  const ranked = vias.filter((read) => read.via === 'rank').length
  t.ok(ranked >= 3 * (RUNS - 1), `${ranked} of ${vias.length} deep pages located through the order-statistic index`)

  // Cursor pages, each from another position.
  for (let run = 0; run < RUNS; run++) {
    await read({ sort: 'id', order: 'asc', cursor: { key: null, id: 100 + 211 * run, direction: 'after' } })
    await read({ sort: 'subject', order: 'asc', cursor: { key: `subject ${run}`, id: 50 * run, direction: 'before' } })
  }

  // Without writes, pages from anchors once they are read. A set is read again only after a pause nine
  // times as long as its last read took (src/pages/anchors/anchor-set.ts), and the reads cut short by
  // the writes above took longer on a busy server: the pages asked for meanwhile wait a little longer
  // each time, a minute in all at most, rather than giving up after 200 pages asked back to back.
  /** Reads `request` until it comes from its whole set of anchors (another sort's reads do not count). */
  const untilFromAnchors = async (request: Parameters<typeof read>[0]): Promise<void> => {
    let whole = false
    for (let attempt = 0; attempt < 200 && !whole; attempt++) {
      await sleep(3 * attempt)
      const before = vias.length
      await read(request, {}, fromAnchors)
      whole = vias.slice(before).some((v) => v.via === 'anchor' && v.partial !== true)
    }
  }
  await untilFromAnchors({ offset: 1200, sort: 'id', order: 'asc' })
  const start = vias.length
  // Each page 10 rows after an anchor and of at most 12 rows: all of them read with the same statement
  // (a page's statement comes in sizes, src/pages/reach.ts; these need the smallest).
  for (let run = 0; run < RUNS; run++) await read({ offset: 4 * STRIDE + 3 * STRIDE * run + 10, limit: 5 + run, sort: 'id', order: 'asc' }, {}, fromAnchors)
  t.equal(vias.slice(start).filter((read) => read.via === 'anchor').length, RUNS, 'then every deep page from anchors')

  // A row created before each page by subject (with an id above the others, as the identity sequence
  // gives): once its anchors are read, the pages follow them.
  await untilFromAnchors({ offset: 1200, sort: 'subject', order: 'asc' })
  const following = vias.length
  for (let run = 0; run < RUNS + 4; run++) {
    await run_(w.app, `INSERT INTO messages (id, content, subject, priority, author_id) OVERRIDING SYSTEM VALUE
      SELECT max(id) + 1, 'created', NULL, 'normal', (SELECT min(id) FROM users) FROM messages`)
    // Pages far apart, so that none finds the counts of created rows an earlier one read near it. The
    // created rows have no subject, so they sort after every anchor: each page is 10 rows after one.
    await read({ offset: 4 * STRIDE + 6 * STRIDE * run + 10, limit: 5 + run, sort: 'subject', order: 'asc' }, {}, fromAnchors)
  }
  const followed = vias.slice(following).filter((read) => read.followed === true).length
  t.ok(followed >= RUNS, `then the deep pages follow the anchors (${followed} of ${vias.length - following}; a page whose anchors were read again after the write needs not)`)

  const plans = await rawRows<Plan>(w.app, 'SELECT statement, generic_plans::int AS generic_plans, custom_plans::int AS custom_plans FROM pg_prepared_statements')
  const kinds: Record<string, (text: string) => boolean> = {
    'a page located in the order-statistic index': (text) => text.includes(`l${BUCKET_LEVELS - 1} AS MATERIALIZED`) && text.includes('page.ord'),
    'a page by cursor': (text) => text.includes('EXISTS (SELECT 1 FROM messages'),
    'a page from an anchor': (text) => text.includes('AS version') && text.includes('page.ord >'),
    'the rows created before the anchors near a page': (text) => text.includes('pg_visible_in_snapshot') && text.includes('json_array_elements'),
    'a page following created rows': (text) => text.includes('pg_visible_in_snapshot') && text.includes('page.ord >')
  }
  for (const [kind, matches] of Object.entries(kinds)) {
    const ran = plans.filter((plan) => matches(plan.statement) && plan.generic_plans + plan.custom_plans >= RUNS)
    t.ok(ran.length > 0, `${kind}: statements that ran ${RUNS} times or more`)
    for (const plan of ran) {
      t.ok(plan.custom_plans <= 5 && plan.generic_plans >= RUNS - 5,
        `${kind}: ${plan.custom_plans} custom plans, then ${plan.generic_plans} runs of the generic plan`)
    }
  }
})
