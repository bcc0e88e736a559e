import { createPublicKey, randomBytes, randomUUID } from 'node:crypto'
import { compactVerify, decodeProtectedHeader, errors } from 'jose'
import t, { type Test } from 'tap'
import { createKeyResolver, KeyLookupError, type KeyResolver, type KeyResolverOptions } from '../../src/auth/jwks.js'
import { MAX_KEY_SET_BYTES, MAX_KEYS } from '../../src/auth/key-set.js'
import { startTestIdp, type TestIdp } from '../helpers/idp.js'

// The key resolver's timing rules (CONTRACT 4 and 16) on a clock the test drives, against a real key
// set on loopback (test/helpers/idp.ts) and real RS256 tokens: a token is accepted when the key the
// resolver answers verifies its signature. Only the clock is the test's; every fetch is real HTTP.

const AUDIENCE = 'backend-3-messages'
const MAX_AGE_MS = 60_000
const WINDOW_MS = 30_000

class Clock {
  at = Date.UTC(2030, 0, 1)
  readonly now = (): number => this.at
  advance (ms: number): void {
    this.at += ms
  }
}

type Verdict = 'accepted' | 'refused'

function resolverFor (t: Test, idp: TestIdp, over: Partial<KeyResolverOptions> = {}): { resolve: KeyResolver, clock: Clock } {
  const clock = new Clock()
  const resolve = createKeyResolver({ issuer: idp.url, maxAgeMs: MAX_AGE_MS, now: clock.now, ...over })
  t.teardown(() => resolve.close())
  return { resolve, clock }
}

/** What the service would do with the token's signature: the resolver's key verifies it, or the token is refused. */
async function verdict (resolve: KeyResolver, token: string): Promise<Verdict> {
  try {
    const pem = await resolve(decodeProtectedHeader(token))
    await compactVerify(token, createPublicKey(pem), { algorithms: ['RS256'] })
    return 'accepted'
  } catch (err) {
    if (err instanceof KeyLookupError || err instanceof errors.JWSSignatureVerificationFailed) return 'refused'
    throw err
  }
}

const segment = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url')

/** The flood of the defect report: a random kid and a junk signature, no key needed. */
const junkToken = (): string => `${segment({ alg: 'RS256', typ: 'JWT', kid: randomUUID() })}.${segment({ sub: 'mallory' })}.${randomBytes(256).toString('base64url')}`

async function setup (t: Test, over: Partial<KeyResolverOptions> = {}): Promise<{ idp: TestIdp, resolve: KeyResolver, clock: Clock }> {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  return { idp, ...resolverFor(t, idp, over) }
}

t.test('anything but RS256 with a sane kid is refused before any fetch', async (t) => {
  const { idp, resolve } = await setup(t)
  const headers = [{}, { alg: 'none', kid: idp.currentKid }, { alg: 'HS256', kid: idp.currentKid }, { alg: 'RS512', kid: idp.currentKid }, { alg: 'rs256', kid: idp.currentKid },
    { alg: 'RS256', kid: '' }, { alg: 'RS256', kid: 7 }, { alg: 'RS256', kid: null }, { alg: 'RS256', kid: 'k'.repeat(257) }]
  for (const header of headers) await t.rejects(resolve(header), KeyLookupError, JSON.stringify(header).slice(0, 60))
  t.equal(idp.jwksRequests, 0)
})

t.test('one fetch caches the whole set: every key in it is accepted without another fetch', async (t) => {
  const { idp, resolve } = await setup(t)
  const first = idp.currentKid
  const second = await idp.rotate()
  const third = await idp.rotate()
  const tokens = await Promise.all([first, second, third].map(async (kid) => await idp.sign({}, { key: kid })))
  // Concurrent first requests share the one fetch.
  t.same(await Promise.all(tokens.map(async (token) => await verdict(resolve, token))), ['accepted', 'accepted', 'accepted'])
  t.same(await Promise.all(tokens.map(async (token) => await verdict(resolve, token))), ['accepted', 'accepted', 'accepted'])
  t.equal(idp.jwksRequests, 1)
  t.equal(await verdict(resolve, await idp.sign({}, { key: 'foreign', kid: second })), 'refused', 'a foreign key under a known kid fails its signature')
})

t.test('a removed key is refused from the fetch that dropped it on, at once', async (t) => {
  const { idp, resolve, clock } = await setup(t)
  const removed = idp.currentKid
  const kept = await idp.rotate()
  const removedToken = await idp.sign({}, { key: removed })
  const keptToken = await idp.sign({}, { key: kept })
  t.equal(await verdict(resolve, removedToken), 'accepted')
  idp.removeKey(removed)
  clock.advance(WINDOW_MS)
  // Any fetch, here one caused by an unknown kid, replaces the set whole.
  t.equal(await verdict(resolve, junkToken()), 'refused')
  t.equal(idp.jwksRequests, 2)
  t.equal(await verdict(resolve, removedToken), 'refused', 'refused at the same instant')
  t.equal(await verdict(resolve, keptToken), 'accepted')
  clock.advance(MAX_AGE_MS + WINDOW_MS)
  t.equal(await verdict(resolve, removedToken), 'refused', 'and after later fetches too')
  t.equal(await verdict(resolve, keptToken), 'accepted')
  t.equal(idp.jwksRequests, 3)
})

t.test('a removed key is refused at most JWKS_MAX_AGE_S after its removal, whatever traffic arrives meanwhile', async (t) => {
  // One request a second for 3 max ages, of both keys, with or without a flood of random kids beside.
  for (const flood of [false, true]) {
    await t.test(flood ? 'with a flood of random kids' : 'known kids only', async (t) => {
      const { idp, resolve, clock } = await setup(t)
      const removed = idp.currentKid
      const kept = await idp.rotate()
      const removedToken = await idp.sign({}, { key: removed })
      const keptToken = await idp.sign({}, { key: kept })
      const start = clock.at
      t.equal(await verdict(resolve, removedToken), 'accepted')
      clock.advance(1000)
      idp.removeKey(removed)
      const removedAt = clock.at
      const seen: Array<{ at: number, removed: Verdict, kept: Verdict, junk?: Verdict }> = []
      while (clock.at < start + 3 * MAX_AGE_MS) {
        clock.advance(1000)
        const junk = flood ? { junk: await verdict(resolve, junkToken()) } : {}
        seen.push({ at: clock.at, removed: await verdict(resolve, removedToken), kept: await verdict(resolve, keptToken), ...junk })
      }
      t.same(seen.filter((entry) => entry.junk === 'accepted'), [], 'every junk token is refused')
      const firstRefusal = seen.find((entry) => entry.removed === 'refused')
      if (firstRefusal === undefined) throw new Error('the removed key was never refused')
      t.ok(firstRefusal.at - removedAt <= MAX_AGE_MS, `refused ${firstRefusal.at - removedAt} ms after its removal`)
      t.same(seen.filter((entry) => entry.at >= firstRefusal.at && entry.removed !== 'refused'), [], 'never accepted again')
      t.same(seen.filter((entry) => entry.kept !== 'accepted'), [], 'the key still in the set is accepted throughout')
      // Once the key is gone its own tokens are unknown kids too: at most one fetch per window, whatever asks.
      t.ok(idp.jwksRequests <= 1 + 3 * MAX_AGE_MS / WINDOW_MS, `${idp.jwksRequests} fetches`)
    })
  }
})

t.test('a key published during a flood of random kids is accepted within 30 s, and the flood causes at most one fetch per 30 s', async (t) => {
  const { idp, resolve, clock } = await setup(t, { maxAgeMs: 600_000 })
  const fetches: number[] = []
  idp.jwksHandler = ({ defaultReply }) => {
    fetches.push(clock.at)
    return defaultReply
  }
  const old = await idp.sign()
  const start = clock.at
  t.equal(await verdict(resolve, old), 'accepted')
  let published: { at: number, token: string } | undefined
  let acceptedAt: number | undefined
  const floodAccepted: number[] = []
  const oldRefused: number[] = []
  // One junk token every 50 ms for 2 minutes; the new key is published just after the fetch of the first token.
  while (clock.at < start + 120_000) {
    clock.advance(50)
    if (await verdict(resolve, junkToken()) !== 'refused') floodAccepted.push(clock.at)
    if (published === undefined) {
      const kid = await idp.rotate()
      published = { at: clock.at, token: await idp.sign({}, { key: kid }) }
    }
    if (acceptedAt === undefined && await verdict(resolve, published.token) === 'accepted') acceptedAt = clock.at
    if (await verdict(resolve, old) !== 'accepted') oldRefused.push(clock.at)
  }
  t.same(floodAccepted, [], 'every junk token is refused')
  t.same(oldRefused, [], 'the key in use is accepted throughout')
  if (published === undefined || acceptedAt === undefined) throw new Error('the published key was never accepted')
  t.ok(acceptedAt - published.at <= 35_000, `the new key was accepted ${acceptedAt - published.at} ms after it was published`)
  t.equal(await verdict(resolve, published.token), 'accepted', 'and stays accepted')
  const gaps = fetches.slice(1).map((at, i) => at - (fetches[i] ?? 0))
  t.same(gaps.filter((gap) => gap < WINDOW_MS), [], `fetches ${gaps.join(', ')} ms apart`)
  t.ok(fetches.length <= 1 + 120_000 / WINDOW_MS, `${fetches.length} fetches in 2 minutes`)
})

t.test('a burst of unknown kids when a fetch is due shares one fetch', async (t) => {
  const { idp, resolve, clock } = await setup(t)
  t.equal(await verdict(resolve, await idp.sign()), 'accepted')
  clock.advance(WINDOW_MS)
  const kid = await idp.rotate()
  const fresh = await idp.sign({}, { key: kid })
  const verdicts = await Promise.all([...Array.from({ length: 50 }, junkToken), fresh].map(async (token) => await verdict(resolve, token)))
  t.same(verdicts, [...Array.from({ length: 50 }, () => 'refused'), 'accepted'])
  t.equal(idp.jwksRequests, 2)
})

interface Outage {
  name: string
  begin: (idp: TestIdp) => void
}

const OUTAGES: Outage[] = [
  { name: '503', begin: (idp) => idp.setDown(true, 'status') },
  { name: 'the connection reset', begin: (idp) => idp.setDown(true, 'reset') },
  { name: 'no answer (the fetch times out)', begin: (idp) => idp.setDown(true, 'hang') },
  { name: 'a redirect (never followed)', begin: (idp) => { idp.jwksHandler = () => ({ status: 302, headers: { location: 'http://127.0.0.1:9/jwks.json' } }) } },
  { name: 'a 200 that is not JSON', begin: (idp) => { idp.jwksHandler = () => ({ status: 200, body: '<html>maintenance</html>' }) } },
  { name: 'a 200 that is not a key set', begin: (idp) => { idp.jwksHandler = () => ({ status: 200, body: { keys: 'none' } }) } },
  { name: `a key set over ${MAX_KEY_SET_BYTES} bytes`, begin: (idp) => { idp.jwksHandler = ({ defaultReply }) => ({ status: 200, body: { ...(defaultReply as { body: object }).body, padding: 'x'.repeat(MAX_KEY_SET_BYTES) } }) } },
  { name: `a key set of more than ${MAX_KEYS} keys`, begin: (idp) => { idp.jwksHandler = () => ({ status: 200, body: { keys: Array.from({ length: MAX_KEYS + 1 }, () => idp.key().publicJwk) } }) } }
]

function endOutage (idp: TestIdp): void {
  idp.setDown(false)
  idp.jwksHandler = undefined
}

/** Advances the clock 30 s at a time, at most `tries` times, until the token is accepted; how many tries it took. */
async function acceptedAfter (resolve: KeyResolver, clock: Clock, token: string, tries = 3): Promise<number | undefined> {
  for (let i = 1; i <= tries; i++) {
    clock.advance(WINDOW_MS)
    if (await verdict(resolve, token) === 'accepted') return i
  }
  return undefined
}

t.test('when a fetch fails, the cached keys stay in use for one more max age, then nothing is', async (t) => {
  for (const outage of OUTAGES) {
    await t.test(outage.name, async (t) => {
      const { idp, resolve, clock } = await setup(t, { timeoutMs: 300 })
      const cachedKid = idp.currentKid
      const cached = await idp.sign({}, { key: cachedKid })
      const withoutKid = await idp.sign({}, { key: cachedKid, kid: null })
      const start = clock.at
      t.equal(await verdict(resolve, cached), 'accepted')
      // Published before the outage, never fetched.
      const unfetched = await idp.sign({}, { key: await idp.rotate() })
      outage.begin(idp)

      clock.advance(MAX_AGE_MS)
      const burst = await Promise.all(Array.from({ length: 20 }, async () => await verdict(resolve, cached)))
      t.same(burst, Array.from({ length: 20 }, () => 'accepted'), 'the set is due, its fetch fails: its keys stay in use')
      t.equal(idp.jwksRequests, 2, 'one fetch for the whole burst')
      clock.advance(500)
      t.equal(await verdict(resolve, cached), 'accepted')
      t.equal(await verdict(resolve, withoutKid), 'accepted', 'a token without kid too: the cached set holds exactly one key')
      t.equal(await verdict(resolve, unfetched), 'refused', 'a key the cached set does not hold is refused')
      t.equal(idp.jwksRequests, 2, 'and nothing is fetched again right after a failure')

      // One request a second until just before twice the max age: all accepted, the provider asked now and then only.
      const verdicts: Verdict[] = []
      while (clock.at < start + 2 * MAX_AGE_MS - 1000) {
        clock.advance(1000)
        verdicts.push(await verdict(resolve, cached))
      }
      t.same(verdicts.filter((v) => v !== 'accepted'), [], `${verdicts.length} requests accepted`)
      t.ok(idp.jwksRequests - 2 <= verdicts.length / 5, `${idp.jwksRequests - 2} fetches for ${verdicts.length} requests`)
      clock.at = start + 2 * MAX_AGE_MS - 1
      t.equal(await verdict(resolve, cached), 'accepted', 'still accepted just before twice the max age')
      clock.at = start + 2 * MAX_AGE_MS
      t.equal(await verdict(resolve, cached), 'refused', 'refused from twice the max age on')
      t.equal(await verdict(resolve, withoutKid), 'refused')

      endOutage(idp)
      const tries = await acceptedAfter(resolve, clock, cached)
      t.ok(tries !== undefined, `accepted again ${tries ?? 'never'} × 30 s after the provider is back`)
      t.equal(await verdict(resolve, unfetched), 'accepted', 'and the fetch that succeeded brought in the whole set')
    })
  }
})

t.test('a provider down from the start: refused, asked again after a short delay, never on every request', async (t) => {
  const { idp, resolve, clock } = await setup(t)
  const token = await idp.sign()
  idp.setDown(true)
  const verdicts: Verdict[] = []
  // Ten requests a second for a minute.
  for (let i = 0; i < 600; i++) {
    verdicts.push(await verdict(resolve, token))
    clock.advance(100)
  }
  t.same(verdicts.filter((v) => v !== 'refused'), [])
  t.ok(idp.jwksRequests >= 2 && idp.jwksRequests <= 12, `${idp.jwksRequests} fetches for 600 requests`)
  idp.setDown(false)
  const tries = await acceptedAfter(resolve, clock, token, 1)
  t.equal(tries, 1, 'accepted within 30 s of the provider coming back')
})

t.test('a set that grows and shrinks: each key is accepted exactly while the current set holds it', async (t) => {
  const { idp, resolve, clock } = await setup(t)
  const withKid = new Map<string, string>()
  const withoutKid = new Map<string, string>()
  const publish = async (): Promise<string> => {
    const kid = await idp.rotate()
    withKid.set(kid, await idp.sign({}, { key: kid }))
    withoutKid.set(kid, await idp.sign({}, { key: kid, kid: null }))
    return kid
  }
  const first = idp.currentKid
  withKid.set(first, await idp.sign({}, { key: first }))
  withoutKid.set(first, await idp.sign({}, { key: first, kid: null }))

  async function check (t: Test, step: string): Promise<void> {
    const held = new Set(idp.kids)
    const expected: Record<string, Verdict> = {}
    const actual: Record<string, Verdict> = {}
    for (const [kid, token] of withKid) {
      expected[kid] = held.has(kid) ? 'accepted' : 'refused'
      actual[kid] = await verdict(resolve, token)
      // CONTRACT 10: without kid, only while the set holds exactly one key, and only that key.
      expected[`${kid} without kid`] = held.size === 1 && held.has(kid) ? 'accepted' : 'refused'
      actual[`${kid} without kid`] = await verdict(resolve, withoutKid.get(kid) ?? '')
    }
    t.same(actual, expected, step)
  }

  await check(t, '{k1}')
  const steps: Array<[string, () => Promise<void>]> = [
    ['{k1, k2}', async () => { await publish() }],
    ['{k1, k2, k3}', async () => { await publish() }],
    ['{k3}', async () => { for (const kid of idp.kids.slice(0, 2)) idp.removeKey(kid) }],
    ['{k3, k4}', async () => { await publish() }],
    ['{}', async () => { for (const kid of idp.kids) idp.removeKey(kid) }],
    ['{k5}', async () => { await publish() }]
  ]
  let fetches = idp.jwksRequests
  for (const [name, change] of steps) {
    await change()
    clock.advance(MAX_AGE_MS)
    await check(t, name)
    t.equal(idp.jwksRequests, fetches + 1, `${name}: one fetch`)
    fetches = idp.jwksRequests
  }
})
