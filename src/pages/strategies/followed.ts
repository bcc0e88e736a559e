import { anchored } from './anchored.js'
import type { PageStrategy } from './strategy.js'

// A deep page from anchors that rows have been created since (../anchors/): each anchor has moved by the
// created rows sorting before it, which the page's own statement counts from the table's change log, so
// a steady writer does not send every deep page of an unlocated sort back to walking. Writes it cannot
// follow (an older row updated or deleted, more than FOLLOW_MAX rows) retire the set. A newer read of
// the set that took its place meanwhile serves the page as `anchored` would.

export const followed: PageStrategy = {
  name: 'followed',
  applies: ({ reader: { anchors }, db, page, params }) => page.cursor === null && anchors !== undefined && anchors.behind(db, page, params),
  async read (ask) {
    const { reader: { anchors, off }, db, page, present, params } = ask
    const first = anchors!.held(db, page, params)
    const found = await anchors!.followed(db, page, present, params)
    if (found !== undefined || off().has('anchored') || anchors!.held(db, page, params) === first || !anchored.applies(ask)) return found
    return await anchored.read(ask)
  }
}
