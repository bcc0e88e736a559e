import { MAX_LIMIT } from '../../schemas/pagination.js'
import { readVia } from '../deep-page-reads.js'
import { groupedSql } from '../grouped.js'
import { strip } from '../items.js'
import { reachFor } from '../reach.js'
import type { PageStrategy } from './strategy.js'

// An unfiltered deep page of a sort with few distinct keys (a priority, a subject), located group by
// group in the counters of each group (../grouped.ts), in the page's own snapshot. Like a located page,
// it needs nothing held and starts no scan of anchors. A column with more than MAX_GROUPS distinct keys
// is found out by the statement itself: the page is then read another way, and the sort is not tried
// this way again on that handle for MANY_GROUPS_MS.

/** How long a handle whose grouped sort has too many distinct keys reads its deep pages another way. */
const MANY_GROUPS_MS = 60_000

export const grouped: PageStrategy = {
  name: 'grouped',
  applies ({ reader: { spec, manyGroupsUntil }, db, page, present }) {
    if (page.cursor !== null || present.length > 0 || spec.groupRanked?.[page.sort] === undefined) return false
    return (manyGroupsUntil.get(db)?.get(page.sort) ?? 0) <= performance.now()
  },
  async read ({ reader: { spec, pages, manyGroupsUntil }, db, page, params }) {
    const group = spec.groupRanked![page.sort]!
    const reach = reachFor(page.limit, MAX_LIMIT)
    const run = pages.get(`grouped:${page.sort}:${page.order}:${reach}`, () => groupedSql(spec, page.sort, group, page.order, reach))
    const rows = await run(db, { ...params, offset: page.offset, limit: page.limit })
    if (rows[0]?.complete === false) {
      const until = manyGroupsUntil.get(db) ?? new Map()
      manyGroupsUntil.set(db, until.set(page.sort, performance.now() + MANY_GROUPS_MS))
      return undefined
    }
    readVia(spec.table, 'rank')
    // Read before strip(), which removes it from the rows.
    const total = rows[0]?.total ?? 0
    return { ...strip(rows[0]?.ord == null ? [] : rows), total }
  }
}
