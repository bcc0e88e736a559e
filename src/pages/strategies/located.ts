import { MAX_LIMIT } from '../../schemas/pagination.js'
import { readVia } from '../deep-page-reads.js'
import { rankedDim } from '../filters.js'
import { locatedSql } from '../locate.js'
import { reachFor } from '../reach.js'
import { readNumbered, type PageStrategy } from './strategy.js'

// A deep page of a ranked sort (by id or created time, unfiltered or under the ranked filter), located
// in the order-statistic buckets that the triggers keep in the writing transaction (../locate.ts): at
// most 256 counts a level and fewer than 256 rows skipped, read in the page's own snapshot, so the page
// is exact under any writer and needs nothing held by the service. Anchors are never read for these
// pages: a page the counters serve starts no scan of its result set.

export const located: PageStrategy = {
  name: 'located',
  applies: ({ reader: { spec }, page, present }) => page.cursor === null && rankedDim(spec, page.sort, present) !== undefined,
  async read (ask) {
    const { reader: { spec }, page, present, params } = ask
    const dim = rankedDim(spec, page.sort, present)!
    readVia(spec.table, 'rank')
    const reach = reachFor(page.limit, MAX_LIMIT)
    return await readNumbered(ask, `located:${page.sort}:${page.order}:${reach}:${present.join(',')}`, () => locatedSql(spec, page.sort, dim, page.order, present, reach),
      { ...params, offset: page.offset, limit: page.limit })
  }
}
