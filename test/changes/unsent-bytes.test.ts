// CONTRACT 16 "Live delivery is shared fairly", the share rule alone (src/changes/live/unsent-bytes.ts):
// what streams hold unsent is counted by client address; an address holding more than one stream's
// worth leaves room for the others; requests that wait are served by address, the address holding
// least first; and the total never passes the limit. The same rule over real slow links is
// live-fair.test.ts.
import t from 'tap'
import { UnsentBytes, type Account, type Room } from '../../src/changes/live/unsent-bytes.js'
import { LIVE_UNSENT_KEPT_FREE_PART } from '../../src/memory/budget.js'

const MiB = 1024 * 1024
const LIMIT = 64 * MiB
/** One answer's room, and what one stream may hold while it asks for the next. */
const ANSWER = MiB
const LIGHT = 2 * MiB

const budget = (): UnsentBytes => new UnsentBytes({ limit: LIMIT, light: LIGHT, answer: ANSWER })

/** Takes answers' room for `address` until the rule refuses; what it got. */
function takeAll (unsent: UnsentBytes, address: string): Room[] {
  const rooms: Room[] = []
  for (let room = unsent.take(address, ANSWER); room !== undefined; room = unsent.take(address, ANSWER)) rooms.push(room)
  return rooms
}

t.test('an address alone takes all but what it leaves free for others; another address then still gets room, at once', async (t) => {
  const unsent = budget()
  t.equal(unsent.keptFree, LIMIT / LIVE_UNSENT_KEPT_FREE_PART)
  const heavy = takeAll(unsent, 'heavy')
  t.equal(heavy.length, (LIMIT - unsent.keptFree) / ANSWER, `it takes ${heavy.length} answers' room: all but LIMIT / ${LIVE_UNSENT_KEPT_FREE_PART}`)
  t.equal(unsent.held, LIMIT - unsent.keptFree)

  const first = unsent.take('phone', ANSWER)
  t.ok(first !== undefined, 'an address holding nothing gets room for an answer')
  const second = unsent.take('phone', ANSWER)
  t.ok(second !== undefined, 'and, holding one stream\'s worth or less, for its next')
  t.equal(unsent.take('phone', ANSWER), undefined, 'past one stream\'s worth, it too leaves the rest free')
  t.equal(unsent.take('heavy', 1), undefined, 'the heavy address gets nothing more')
})

t.test('addresses holding little leave one answer\'s room free between them: a new address still gets room at once', async (t) => {
  const unsent = budget()
  takeAll(unsent, 'heavy')
  const light = ['a', 'b', 'c', 'd']
  for (const address of light) t.ok(unsent.take(address, ANSWER) !== undefined, `${address}, holding nothing, gets room for an answer`)
  t.equal(unsent.held, LIMIT - unsent.keptFree + light.length * ANSWER)
  // Each now holds one answer; a second keeps it within LIGHT, taken while one answer stays free.
  const second = light.map((address) => unsent.take(address, ANSWER) !== undefined)
  t.same(second, [true, true, true, false], 'the last of them would take the last answer\'s room, and is refused')
  t.equal(unsent.limit - unsent.held, ANSWER, 'one answer\'s room is free')
  t.ok(unsent.take('phone', ANSWER) !== undefined, 'an address holding nothing gets it')
})

t.test('turned into unsent bytes as they are written, room is counted once; what is left is given back', async (t) => {
  const unsent = budget()
  const stream: Account = { address: 'a', counted: 0 }
  const room = unsent.take('a', ANSWER)!
  unsent.report(stream, 300_000, room)
  t.equal(unsent.held, ANSWER, 'the bytes written come out of the room taken for them')
  t.equal(room.bytes, ANSWER - 300_000)
  unsent.release(room)
  t.equal(unsent.held, 300_000, 'what the answer did not need is given back; its bytes stay counted')
  unsent.report(stream, 0)
  t.equal(unsent.held, 0)
  t.equal(unsent.addresses, 0, 'an address holding nothing and waiting for nothing is forgotten')
})

t.test('a stream told of its room by what its own report freed, and reporting again at once, is counted once', async (t) => {
  // A stream's client reads; what that frees grants the same stream its waiting request, and the
  // grant makes it look at its socket and report again before the first report has returned.
  const unsent = new UnsentBytes({ limit: 2.5 * MiB, light: LIGHT, answer: ANSWER })
  const stream: Account = { address: 'a', counted: 0 }
  const first = unsent.take('a', ANSWER)!
  unsent.report(stream, ANSWER, first)
  let granted: Room | undefined
  unsent.ask('a', ANSWER, (room) => {
    granted = room
    unsent.report(stream, 0)
  })
  t.equal(granted, undefined, 'its next request waits while it holds an answer unsent and leaves too little free')
  unsent.report(stream, 0)
  t.ok(granted !== undefined, 'its client took the answer: the request is granted')
  t.equal(unsent.held, ANSWER, 'held: the room granted, the change of its unsent bytes counted once')
  unsent.release(granted!)
  t.equal(unsent.held, 0, 'nothing held once the room is given back')
  t.equal(unsent.addresses, 0)
})

t.test('requests that wait are served by address, the one holding least first, not first come first served', async (t) => {
  const unsent = budget()
  const heavy = takeAll(unsent, 'heavy')
  // Light addresses fill the rest, so that nothing more fits for anyone.
  const lights: Room[] = []
  for (let i = 0; unsent.held + ANSWER <= LIMIT; i++) lights.push(unsent.take(`light-${i}`, ANSWER)!)
  t.equal(unsent.take('late', ANSWER), undefined, 'full: even an address holding nothing must wait')

  const served: string[] = []
  const given: Room[] = []
  const ask = (address: string): void => { unsent.ask(address, ANSWER, (room) => { served.push(address); given.push(room) }) }
  ask('heavy')
  ask('heavy')
  ask('late')
  ask('heavy')
  ask('later')
  t.equal(unsent.waiting, 5)
  t.same(served, [])

  // The heavy address's clients read: its room comes back an answer at a time.
  unsent.release(heavy.pop()!)
  t.same(served, ['late'], 'the first answer freed goes to an address holding nothing, ahead of the heavy address that asked first')
  unsent.release(heavy.pop()!)
  t.same(served, ['late', 'later'])
  unsent.release(heavy.pop()!)
  t.same(served, ['late', 'later'], 'the heavy address gets room again only once the others can keep what they leave free')
  for (const room of lights) unsent.release(room)
  t.same(served, ['late', 'later', 'heavy'], 'as the light addresses give theirs back, it gets room up to what it leaves free, no further')
  t.equal(unsent.held, LIMIT - unsent.keptFree, 'all but LIMIT / 8 held')
  for (const room of given.splice(0, 2)) unsent.release(room)
  t.same(served, ['late', 'later', 'heavy', 'heavy', 'heavy'], 'and its other waiting requests once the late addresses give theirs back')
  t.equal(unsent.waiting, 0)
  t.ok(unsent.highest <= LIMIT, `never more than the limit held (${unsent.highest})`)
})

t.test('a request that is cancelled (its stream closed) is never granted, and stops holding others back', async (t) => {
  const unsent = budget()
  const heavy = takeAll(unsent, 'heavy')
  for (let i = 0; unsent.held + ANSWER <= LIMIT; i++) unsent.take(`light-${i}`, ANSWER)
  // A large request of an address holding nothing comes first; a small one of another waits behind it.
  let big = false
  const cancel = unsent.ask('big', 4 * ANSWER, () => { big = true })
  let small = false
  unsent.ask('small', ANSWER, () => { small = true })
  unsent.release(heavy.pop()!)
  t.notOk(small, 'the small request does not pass the large one of an address holding as little')
  cancel()
  t.ok(small, 'once the large one is cancelled, the small one is served')
  t.notOk(big, 'and the cancelled one never is')
})

t.test('many addresses at once: each gets its first answer, and the total never passes the limit', async (t) => {
  const unsent = budget()
  const rooms = new Map<string, Array<{ room: Room, stream: Account }>>()
  const granted = new Set<string>()
  const addresses = Array.from({ length: 200 }, (_, i) => `10.0.${i >> 8}.${i & 255}`)
  // Every address asks for four answers' room at once, in turn; whatever is granted is written and held.
  for (let round = 0; round < 4; round++) {
    for (const address of addresses) {
      unsent.ask(address, ANSWER, (room) => {
        granted.add(address)
        const stream: Account = { address, counted: 0 }
        unsent.report(stream, ANSWER / 2, room)
        rooms.set(address, [...(rooms.get(address) ?? []), { room, stream }])
      })
    }
  }
  t.ok(unsent.held <= LIMIT, `held within the limit (${unsent.held})`)
  // Clients read: every address's bytes drain, round after round, until every request is served.
  for (let turn = 0; turn < 10_000 && unsent.waiting > 0; turn++) {
    for (const held of rooms.values()) {
      const next = held.shift()
      if (next === undefined) continue
      unsent.release(next.room)
      unsent.report(next.stream, 0)
    }
  }
  t.equal(unsent.waiting, 0, 'every request was served in the end')
  t.equal(granted.size, addresses.length, 'every address got room')
  t.ok(unsent.highest <= LIMIT, `the total never passed the limit (${unsent.highest} at most)`)
})
