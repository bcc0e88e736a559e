import t from 'tap'
import { ANCHOR_BYTES, MESSAGE_ITEM_BYTES, MESSAGE_PAGE_BYTES, MOVIE_PAGE_BYTES, SEARCH_IDS, USER_PAGE_BYTES, messageBytes, movieBytes, pageBytes, userBytes } from '../../src/memory/budget.js'
import { generateMessage, seedUser } from '../../scripts/seed.js'
import { createRandom } from '../../scripts/seeded-random.js'

const MiB = 1024 * 1024

t.test('the caches add up to the budget docs/operations.md states', async (t) => {
  t.equal((MESSAGE_PAGE_BYTES + MESSAGE_ITEM_BYTES + SEARCH_IDS * 8 + ANCHOR_BYTES + USER_PAGE_BYTES + MOVIE_PAGE_BYTES) / MiB, 56,
    '24 + 4 + 8 + 16 + 2 + 2 MiB (search ids are 8 bytes each)')
})

t.test('a page of seeded messages is estimated as the heap measured it', async (t) => {
  const random = createRandom(3)
  const rows = Array.from({ length: 25 }, (_, i) => {
    const m = generateMessage(random)
    return { ...m, author: { id: i, name: seedUser(i + 1).name } }
  })
  const cursor = 'eyJrIjoiMjAyNi0wMS0wMVQwMDowMDowMC4wMDBaIiwiaSI6MTJ9.abcdefghijk'
  const estimate = pageBytes({ data: rows, pagination: { nextCursor: cursor, prevCursor: cursor } }, messageBytes)
  // Heap snapshots: 17.8 KB a cached 25-message page (src/memory/budget.ts). The estimate must not
  // fall below it, or the bound would not hold; nor far above, or the cache would hold needlessly little.
  t.ok(estimate >= 17_800 && estimate <= 23_000, `estimate ${estimate} bytes`)
  t.ok(messageBytes({ content: 'x'.repeat(1000), subject: null, author: {} }) > messageBytes({ content: 'x', subject: null, author: {} }) + 1900,
    'a longer text costs twice its length (the string, and its copy in the serialized body)')
  t.equal(pageBytes({ data: [], pagination: { nextCursor: null, prevCursor: null } }, messageBytes), 400, 'an empty page still costs its object and body')
  t.ok(userBytes({ subjectId: 'auth0|1', email: 'a@example.com', name: null }) > 480)
  t.ok(movieBytes({ title: 'Alien', genre: 'Horror' }) > 260)
})
