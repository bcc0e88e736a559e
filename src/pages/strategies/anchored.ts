import type { PageStrategy } from './strategy.js'

// A deep page from the anchors of its result set, as they were read (../anchors/): a seek from the
// anchor before the page, skipping fewer than STRIDE rows, exact because the page's own statement
// reads the version the set was read at. It serves the sorts and filters the counters do not locate,
// once `awaited` has read their anchors. When the statement reads a newer version, the set is marked
// behind for `followed` (or retired when `followed` is off), and the page is read the next way.
// While the statement ran, a newer read of the set may have taken the place of the one it read; the
// page is then read once more, from that one, rather than walked.

export const anchored: PageStrategy = {
  name: 'anchored',
  applies: ({ reader: { anchors }, db, page, params }) => page.cursor === null && anchors !== undefined && anchors.reaches(db, page, params),
  async read (ask) {
    const { reader: { anchors, off }, db, page, present, params } = ask
    const first = anchors!.held(db, page, params)
    const found = await anchors!.asRead(db, page, present, params, !off().has('followed'))
    if (found !== undefined || anchors!.held(db, page, params) === first || !anchored.applies(ask)) return found
    return await anchors!.asRead(db, page, present, params, !off().has('followed'))
  }
}
