import { NEAR_START, nearStartSql } from '../numbered.js'
import { readNumbered, type PageStrategy } from './strategy.js'

// A page near the start, by OFFSET from the start of the sort's index (../numbered.ts): below NEAR_START
// rows, the walk is as cheap as locating the page any other way, and needs nothing held.

export const start: PageStrategy = {
  name: 'start',
  applies: ({ page }) => page.cursor === null && page.offset < NEAR_START,
  async read (ask) {
    const { reader: { spec }, page, present, params } = ask
    return await readNumbered(ask, `start:${page.sort}:${page.order}:${present.join(',')}`, () => nearStartSql(spec, page.sort, page.order, present),
      { ...params, offset: page.offset, limit: page.limit })
  }
}
