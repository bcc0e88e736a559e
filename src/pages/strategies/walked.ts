import { readVia } from '../deep-page-reads.js'
import { walkedSql } from '../numbered.js'
import { readNumbered, type PageStrategy } from './strategy.js'

// A deep page with nothing better to find it: OFFSET from whichever end of the index is nearer, the
// total read first in the same statement (../numbered.ts). It reads any page by number, so it comes
// last and is never turned off. It is admitted as a heavy read for its asker (src/db/heavy-reads.ts).

export const walked: PageStrategy = {
  name: 'walked',
  applies: ({ page }) => page.cursor === null,
  async read (ask) {
    const { reader: { spec }, page, present, params, asker } = ask
    readVia(spec.table, 'offset')
    return await readNumbered(ask, `walked:${page.sort}:${page.order}:${present.join(',')}`, () => walkedSql(spec, page.sort, page.order, present),
      { ...params, offset: page.offset, limit: page.limit }, asker)
  }
}
