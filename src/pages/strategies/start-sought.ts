import { MAX_LIMIT } from '../../schemas/pagination.js'
import { NEAR_START, startSoughtSql } from '../numbered.js'
import { reachFor } from '../reach.js'
import { BEFORE_FIRST_ID } from '../seek.js'
import { readNumbered, type PageStrategy } from './strategy.js'

// A descending page near the start of a sort with long runs of ties (CollectionSpec.grouped), sought
// run by run from before the first row (../numbered.ts). Its ties run by id ascending, against the
// (key, id) index, so an OFFSET walk sorts a whole run before the first row of the page. It applies
// unfiltered, or under filters that lead an index before the key (CollectionSpec.walkFilters); under
// others the result set is small and the walk stays.

export const startSought: PageStrategy = {
  name: 'start-sought',
  applies ({ reader: { spec }, page, present }) {
    if (page.cursor !== null || page.offset >= NEAR_START) return false
    if (page.order !== 'desc' || spec.grouped?.includes(page.sort) !== true) return false
    const leading = spec.walkFilters?.[page.sort] ?? []
    return present.every((filter) => leading.includes(filter))
  },
  async read (ask) {
    const { reader: { spec }, page, present, params } = ask
    const reach = reachFor(page.offset + page.limit, NEAR_START + MAX_LIMIT)
    return await readNumbered(ask, `start-sought:${page.sort}:${reach}:${present.join(',')}`, () => startSoughtSql(spec, page.sort, present, reach),
      { ...params, i: BEFORE_FIRST_ID, skip: page.offset, limit: page.limit })
  }
}
