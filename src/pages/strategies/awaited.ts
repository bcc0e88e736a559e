import { anchored } from './anchored.js'
import { followed } from './followed.js'
import type { PageStrategy } from './strategy.js'

// A deep page that only a walk could read otherwise, and whose anchors are not held yet (or only parts of
// them, which do not serve it): it starts reading its result set's anchors in the background and waits
// while they grow, then reads the page from them as `anchored` or `followed` would. A walk by OFFSET
// of a sort without counters runs into the statement timeout on a large table; the anchors of a whole
// result set are read in chunks far inside it. Only pages that nothing before it in the table serves
// come here, so no page the counters serve starts a scan.

export const awaited: PageStrategy = {
  name: 'awaited',
  applies: ({ reader: { anchors }, db, page, params }) => page.cursor === null && anchors !== undefined && anchors.awaits(db, page, params),
  async read (ask) {
    const { reader: { anchors, off }, db, page, present, params } = ask
    if (!await anchors!.awaitSet(db, page, present, params)) return undefined
    // The read under way has reached the page, ended, or stalled; the page does not wait again. A set
    // replaced while a statement ran is read again by `anchored` and `followed` themselves.
    for (const then of [anchored, followed]) {
      if (off().has(then.name) || !then.applies(ask)) continue
      const found = await then.read(ask)
      if (found !== undefined) return found
    }
    anchors!.refresh(db, page, present, params)
    return undefined
  }
}
