import t from 'tap'
import { cursorWindow, placeId } from '../../src/search/ordered-id-cache.js'

// A page by cursor cut from remembered ids must be the page a seek by id reads (CONTRACT 12): after a
// cursor, the ids beyond it; before one, the last ids ahead of it; and whether any id lies on each side,
// the cursor's own id included. Checked against the definitions, over random sets and cursors.
t.test('cursorWindow is the seek by id, in both orders and directions', async (t) => {
  let seed = 3
  const random = () => { seed = (seed * 16807) % 2147483647; return seed / 2147483647 }
  let checked = 0
  const wrong: string[] = []
  for (let round = 0; round < 2000; round++) {
    const desc = random() < 0.5
    const set = new Set<number>()
    const size = Math.floor(random() * 12)
    while (set.size < size) set.add(1 + Math.floor(random() * 30))
    const ids = Float64Array.from([...set].sort((a, b) => desc ? b - a : a - b))
    const cursor = Math.floor(random() * 32)
    const direction = random() < 0.5 ? 'after' : 'before'
    const limit = 1 + Math.floor(random() * 5)
    const precedes = (value: number) => desc ? value > cursor : value < cursor
    const follows = (value: number) => desc ? value < cursor : value > cursor
    const all = [...ids]
    let expected: { page: number[], before: boolean, after: boolean }
    if (direction === 'after') {
      const beyond = all.filter(follows)
      expected = { page: beyond.slice(0, limit), before: all.some((v) => !follows(v)), after: beyond.length > limit }
    } else {
      const ahead = all.filter(precedes)
      expected = { page: ahead.slice(Math.max(0, ahead.length - limit)), before: ahead.length > limit, after: all.some((v) => !precedes(v)) }
    }
    const got = cursorWindow(ids, cursor, desc, direction, limit)
    const actual = { page: all.slice(got.from, got.to), before: got.before, after: got.after }
    checked++
    if (JSON.stringify(actual) !== JSON.stringify(expected)) wrong.push(JSON.stringify({ ids: all, desc, cursor, direction, limit, expected, actual }))
  }
  t.equal(checked, 2000, 'every case checked')
  t.same(wrong.slice(0, 5), [], 'every window is the seek\'s page and flags')
})

t.test('placeId counts the ids before an id and through it', async (t) => {
  const asc = Float64Array.from([2, 4, 6])
  t.same(placeId(asc, 4, false), { before: 1, through: 2 }, 'an id held: it counts in through')
  t.same(placeId(asc, 5, false), { before: 2, through: 2 }, 'an id not held: both the same')
  t.same(placeId(asc, 1, false), { before: 0, through: 0 }, 'before every id')
  t.same(placeId(asc, 9, false), { before: 3, through: 3 }, 'after every id')
  const desc = Float64Array.from([6, 4, 2])
  t.same(placeId(desc, 4, true), { before: 1, through: 2 }, 'descending: an id held')
  t.same(placeId(desc, 7, true), { before: 0, through: 0 }, 'descending: ahead of every id')
  t.same(placeId(new Float64Array(0), 1, false), { before: 0, through: 0 }, 'no ids')
})
