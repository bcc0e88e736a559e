/**
 * What the service's caches may hold, all in one place, so that their bounds visibly add up.
 *
 * Each bound counts heap bytes as a heap snapshot counts them, not the length of the text: a cached page
 * is its row objects, their strings (content, subject, names, timestamps, cursor keys) and the
 * serialized body the representation keeps with it (src/http-cache/representation.ts), in which the text
 * appears a second time. The estimate below (twice the text, plus about 450 bytes a row) errs on the
 * safe side of what heap snapshots of the service measured a page to take
 * (docs/performance.md#memory-budget).
 *
 * Together: 24 + 4 + 8 + 16 + 2 + 2 MiB of pages, messages, search ids, deep-page anchors, user and movie
 * pages, plus at most 10,000 verified tokens (a token string and its user, estimated at 1.2 KB each),
 * about 68 MiB. With what the service holds at rest (docs/performance.md#memory-budget) and the heap's
 * headroom for garbage over the caches, the process stays under the 250 MB bound (docs/operations.md, "Memory: what each cache may hold").
 */

const MiB = 1024 * 1024

/** Pages of GET /v2/messages and of search, until a write to messages or users. */
export const MESSAGE_PAGE_BYTES = 24 * MiB
/** Single messages of GET /v2/messages/{id}. */
export const MESSAGE_ITEM_BYTES = 4 * MiB
/** The ordered ids of search terms' matches, 8 bytes each (Float64Array): 1,048,576 ids. */
export const SEARCH_IDS = MiB
/**
 * Anchors of deep pages (src/pages/anchors/anchor-set.ts), per database handle: an id and a sort key for every
 * 256 rows of a result set, 16 to 60 bytes each. Both orders of each sort's set at 10,000,000 messages
 * fit with room for filtered sets; a bound that did not hold the cold sorts of one order together made a
 * mix of them read each other's anchors out and again (docs/performance.md#memory-budget).
 */
export const ANCHOR_BYTES = 16 * MiB
/** Pages of /v2/users and of /v2/movies. */
export const USER_PAGE_BYTES = 2 * MiB
export const MOVIE_PAGE_BYTES = 2 * MiB
/**
 * Event bytes written to live streams that their clients have not taken yet, with the room taken for
 * answers being read, over all streams (src/changes/live/unsent-bytes.ts). A stream holds less than
 * LIVE_MAX_BUFFER_BYTES and one answer of about 1 MiB; past this bound, streams wait for their next
 * answer until clients read, so many phones catching up from different positions cannot hold an
 * answer each.
 */
export const LIVE_UNSENT_BYTES = 64 * MiB
/**
 * The part of it (one in this many) that an address holding more than one stream's worth cannot take
 * (CONTRACT 16): kept for the addresses that hold little, so that one address's slow streams never
 * hold another client's answers back. 8 MiB of the 64: room for the first answers of seven clients at
 * once, while one address alone may still fill seven eighths.
 */
export const LIVE_UNSENT_KEPT_FREE_PART = 8

// A string is a 16-byte header and, for the ASCII the service mostly holds, a byte a character; its
// bytes then appear again in the serialized body.
const text = (value: string | null | undefined): number => value == null ? 0 : 2 * value.length + 16

/** A message: its object and its author's (about 130 bytes), its strings, its share of the body's JSON. */
export function messageBytes (m: { content: string, subject: string | null, author: { name?: string | null } }): number {
  return 420 + text(m.content) + text(m.subject) + text(m.author.name)
}

export function userBytes (u: { subjectId: string, email: string | null, name: string | null }): number {
  return 480 + text(u.subjectId) + text(u.email) + text(u.name)
}

export function movieBytes (m: { title: string, genre: string }): number {
  return 260 + text(m.title) + text(m.genre)
}

/** A page: its rows, the page object, its pagination and cursors. */
export function pageBytes<T> (page: { data: T[], pagination: { nextCursor: string | null, prevCursor: string | null } }, rowBytes: (row: T) => number): number {
  let size = 400 + text(page.pagination.nextCursor) + text(page.pagination.prevCursor)
  for (const row of page.data) size += rowBytes(row)
  return size
}
