import { randomUUID } from 'node:crypto'
import t from 'tap'
import type { App } from '../../src/app.js'
import { build } from '../helpers/build.js'
import { REST_OF_WINDOW, restOfWindow } from '../helpers/rate-limit.js'

const TOO_MANY = { error: 'Too many requests' }
const caller = (sub: string) => ({ 'x-test-user': JSON.stringify({ sub, role: 'User' }) })

// Public routes count by address; a protected route counts an authenticated caller by subject.
async function statuses (app: App, n: number, headers?: Record<string, string>): Promise<number[]> {
  const url = headers === undefined ? '/v2/movies?limit=1' : '/v2/users/me'
  const result: number[] = []
  for (let i = 0; i < n; i++) result.push((await app.inject({ url, headers })).statusCode)
  return result
}

t.test('RATE_LIMIT_MAX requests per minute per caller, then 429 with Retry-After', async (t) => {
  const app = await build(t, { testAuth: true, config: { rateLimitMax: 3 } })

  t.same(await statuses(app, 3), [200, 200, 200])
  const refused = await app.inject({ url: '/v2/movies?limit=1' })
  t.equal(refused.statusCode, 429)
  t.same(refused.json(), TOO_MANY)
  t.equal(restOfWindow(refused.headers['retry-after']), REST_OF_WINDOW, `Retry-After ${String(refused.headers['retry-after'])}`)
  t.equal(refused.headers['x-ratelimit-limit'], '3')
  t.equal(refused.headers['x-ratelimit-remaining'], '0')
  t.ok(refused.headers['x-request-id'], 'a refused request still carries its request id')

  // An authenticated caller is counted by subject, not by the address it shares with others.
  t.same(await statuses(app, 3, caller('alice')), [200, 200, 200])
  t.same(await statuses(app, 1, caller('alice')), [429])
  t.same(await statuses(app, 3, caller('bob')), [200, 200, 200])
})

// CONTRACT 16: what is refused costs its sender as much as what is served, or a flood of bad tokens and
// bad bodies would be free to send.
t.test('refused tokens count against their address, invalid requests against their caller', async (t) => {
  const app = await build(t, { testAuth: true, config: { rateLimitMax: 3 } })
  const refused = []
  for (let i = 0; i < 4; i++) {
    const res = await app.inject({ url: '/v2/users/me', headers: { 'x-test-user': 'not a caller' } })
    refused.push([res.statusCode, res.json()])
  }
  t.same(refused, [
    [401, { error: 'Invalid or missing token' }], [401, { error: 'Invalid or missing token' }],
    [401, { error: 'Invalid or missing token' }], [429, TOO_MANY]
  ], 'the fourth bad token of the minute is 429, not 401')
  t.same(await statuses(app, 1), [429], 'the address\'s public requests share that count')
  t.same(await statuses(app, 1, caller('carol')), [200], 'an authenticated caller at that address is counted by subject')

  const invalid = []
  for (let i = 0; i < 3; i++) {
    const res = await app.inject({ method: 'POST', url: '/v2/messages', headers: { ...caller('dave'), 'content-type': 'application/json' }, payload: i === 0 ? '{' : '{}' })
    invalid.push(res.statusCode)
  }
  t.same(invalid, [400, 400, 400], 'malformed and invalid bodies')
  t.same(await statuses(app, 1, caller('dave')), [429], 'they counted: the caller\'s next request is refused')
})

t.test('RATE_LIMIT_MAX=0 turns limiting off', async (t) => {
  const app = await build(t, { config: { rateLimitMax: 0 } })
  const results = await statuses(app, 20)
  t.same(results, Array(20).fill(200))
  const response = await app.inject({ url: '/health' })
  t.equal(response.headers['x-ratelimit-limit'], undefined)
})

// With REDIS_URL the instances share one count; without it each instance counts on its own.
// CI sets TEST_REDIS_URL to the local Redis server; both branches assert real behaviour.
t.test('several instances and the shared store', async (t) => {
  const redisUrl = process.env.TEST_REDIS_URL === '' ? undefined : process.env.TEST_REDIS_URL
  const config = { rateLimitMax: 4, redisUrl }
  const first = await build(t, { testAuth: true, config })
  const second = await build(t, { testAuth: true, config })
  // A subject of its own, so runs never see each other's counts in a shared Redis.
  const headers = caller(`shared-${randomUUID()}`)

  t.same(await statuses(first, 3, headers), [200, 200, 200])
  if (redisUrl !== undefined) {
    t.same(await statuses(second, 2, headers), [200, 429], 'the second instance sees the first one\'s requests')
  } else {
    t.same(await statuses(second, 4, headers), [200, 200, 200, 200], 'each instance counts on its own')
  }
})

t.test('an unreachable Redis does not stop the service', async (t) => {
  const app = await build(t, { config: { rateLimitMax: 2, redisUrl: 'redis://127.0.0.1:1' } })
  // Counting is skipped while the store is down (skipOnError): requests are served, not failed.
  t.same(await statuses(app, 3), [200, 200, 200])
})
