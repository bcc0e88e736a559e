import type { PageStrategy } from './strategy.js'

// A deep page from anchors that rows have been created since (../anchors/): each anchor has moved by the
// created rows sorting before it, which the page's own statement counts from the table's change log, so
// a steady writer does not send every deep page of an unlocated sort back to walking. Writes it cannot
// follow (an older row updated or deleted, more than FOLLOW_MAX rows) retire the set.

export const followed: PageStrategy = {
  name: 'followed',
  applies: ({ reader: { anchors }, db, page, params }) => page.cursor === null && anchors !== undefined && anchors.behind(db, page, params),
  read: async ({ reader: { anchors }, db, page, present, params }) => await anchors!.followed(db, page, present, params)
}
