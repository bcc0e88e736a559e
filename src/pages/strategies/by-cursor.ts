import { sql } from 'drizzle-orm'
import { MAX_LIMIT } from '../../schemas/pagination.js'
import { beside } from '../cursor.js'
import { strip, totalSql } from '../items.js'
import { scanOf } from '../order.js'
import { reachFor } from '../reach.js'
import { seekSql } from '../seek.js'
import type { PageStrategy } from './strategy.js'

// A page by cursor (CONTRACT 12): a seek beyond the cursor's position on the (key, id) index (../seek.ts),
// up to `limit` rows, whether any lie the other way, and the total (or the companion), in one
// statement. The only way to read a page by cursor: a position does not move when rows are written
// elsewhere, an offset does.

export const byCursor: PageStrategy = {
  name: 'cursor',
  applies: (ask) => ask.page.cursor !== null,
  async read ({ reader, db, page, present, params, asker, companion }) {
    const cursor = page.cursor!
    const scan = scanOf(cursor, page.order)
    const keyNull = cursor.key === null
    // One more row than the page, to learn whether more follow.
    const reach = reachFor(page.limit + 1, MAX_LIMIT + 1)
    const name = `seek:${page.sort}:${scan.keyDesc}:${scan.idDesc}:${keyNull}:${reach}:${present.join(',')}:${companion?.name ?? ''}`
    const total = companion === undefined ? totalSql(reader.spec, present) : sql`SELECT ${companion.sql}::float8 AS total`
    const run = reader.pages.get(name, () => seekSql(reader.spec, page.sort, scan, keyNull, present, total, reach))
    const check = beside(cursor, page.sort, page.order, cursor.direction === 'after' ? 'after' : 'before')
    // Under filters its index does not lead with, the seek walks until it has a page: it runs with the
    // asker's signal, so that it stops when its client has gone. Unfiltered, it reads `limit` rows of
    // the sort's index and needs none.
    const signal = present.length > 0 ? asker.signal : undefined
    const found = await run(db, { ...params, k: cursor.key, i: cursor.id, ci: check.id, skip: 0, limit: page.limit + 1 }, signal)
    const other = found[0]?.other === true
    const counted = found[0]?.total ?? 0
    const { rows, keys } = strip(found[0]?.ord == null ? [] : found)
    const more = rows.length > page.limit
    if (more) {
      rows.pop()
      keys.pop()
    }
    if (cursor.direction === 'after') return { rows, keys, total: counted, before: other, after: more }
    return { rows: rows.reverse(), keys: keys.reverse(), total: counted, before: more, after: other }
  }
}
