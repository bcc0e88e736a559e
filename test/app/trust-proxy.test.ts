import t, { type Test } from 'tap'
import { Agent, request } from 'undici'
import { ConfigError, loadConfig } from '../../src/config.js'
import { build } from '../helpers/build.js'
import { REST_OF_WINDOW, restOfWindow } from '../helpers/rate-limit.js'

// CONTRACT 11, TRUST_PROXY, on a real listening server. The two peers are told apart by the
// loopback address their sockets are bound to: 127.0.0.2 plays the load balancer, 127.0.0.1 a
// client that connects directly and forges X-Forwarded-For.
const BALANCER = '127.0.0.2'
const DIRECT = '127.0.0.1'
const LIMIT = 3

interface Reply { status: number, remaining: string | undefined, retryAfter?: unknown, body?: unknown }

async function serve (t: Test, trustProxy: string | undefined): Promise<(from: string, forwardedFor?: string) => Promise<Reply>> {
  const app = await build(t, { config: { rateLimitMax: LIMIT, trustProxy: loadConfig({ TRUST_PROXY: trustProxy }).trustProxy } })
  const base = await app.listen({ host: '127.0.0.1', port: 0 })
  const agents = new Map<string, Agent>()
  t.teardown(async () => { await Promise.all([...agents.values()].map(async (agent) => agent.close())) })

  return async function get (from, forwardedFor) {
    let agent = agents.get(from)
    if (agent === undefined) agents.set(from, agent = new Agent({ localAddress: from }))
    const res = await request(`${base}/v2/movies?limit=1`, {
      dispatcher: agent,
      headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }
    })
    const body: unknown = await res.body.json()
    const header = (name: string) => res.headers[name] as string | undefined
    return res.statusCode === 429
      ? { status: 429, remaining: header('x-ratelimit-remaining'), retryAfter: restOfWindow(header('retry-after')), body }
      : { status: res.statusCode, remaining: header('x-ratelimit-remaining') }
  }
}

const ok = (remaining: number): Reply => ({ status: 200, remaining: String(remaining) })
const refused: Reply = { status: 429, remaining: '0', retryAfter: REST_OF_WINDOW, body: { error: 'Too many requests' } }

t.test('TRUST_PROXY unset: the socket address counts, X-Forwarded-For is ignored', async (t) => {
  const get = await serve(t, undefined)
  t.same(await get(BALANCER, '203.0.113.1'), ok(2))
  t.same(await get(BALANCER, '203.0.113.2'), ok(1), 'another forwarded address, the same counter')
  t.same(await get(BALANCER, '203.0.113.3'), ok(0))
  t.same(await get(BALANCER, '203.0.113.4'), refused, 'every client behind the balancer shares its limit')
  t.same(await get(DIRECT), ok(2), 'another peer has its own counter')
})

t.test('TRUST_PROXY lists the balancer: clients behind it are counted apart; an untrusted peer cannot forge', async (t) => {
  const get = await serve(t, BALANCER)
  t.same(await get(BALANCER, '203.0.113.1'), ok(2))
  t.same(await get(BALANCER, '203.0.113.1'), ok(1))
  t.same(await get(BALANCER, '203.0.113.2'), ok(2), 'a second client behind the balancer has its own counter')
  t.same(await get(BALANCER, '203.0.113.1'), ok(0))
  t.same(await get(BALANCER, '203.0.113.1'), refused, 'the first client is limited')
  t.same(await get(BALANCER, '203.0.113.2'), ok(1), 'the second is not')
  t.same(await get(BALANCER), ok(2), 'a request without the header is the balancer\'s own')

  t.same(await get(DIRECT, '203.0.113.7'), ok(2), 'an untrusted peer is counted by its socket address')
  t.same(await get(DIRECT, '203.0.113.8'), ok(1), 'changing the forged header does not give it a new counter')
  t.same(await get(DIRECT, '203.0.113.2'), ok(0), 'nor does naming another client')
  t.same(await get(DIRECT, '198.51.100.1'), refused)
  t.same(await get(BALANCER, '203.0.113.2'), ok(0), 'and it did not spend that client\'s requests')
})

t.test('TRUST_PROXY as CIDR ranges', async (t) => {
  const get = await serve(t, '10.0.0.0/8, 127.0.0.2/32')
  t.same(await get(BALANCER, '203.0.113.1'), ok(2))
  t.same(await get(BALANCER, '203.0.113.2'), ok(2))
  t.same(await get(DIRECT, '203.0.113.1'), ok(2), '127.0.0.1 is outside the ranges: its own address counts')
  t.same(await get(DIRECT, '203.0.113.2'), ok(1))
})

t.test('TRUST_PROXY=1: one hop is trusted, so a client cannot choose its address by prepending entries', async (t) => {
  const get = await serve(t, '1')
  t.same(await get(BALANCER, '198.51.100.1, 203.0.113.5'), ok(2))
  t.same(await get(BALANCER, '198.51.100.2, 203.0.113.5'), ok(1), 'the address the balancer appended counts')
  t.same(await get(BALANCER, '203.0.113.6'), ok(2))
})

t.test('TRUST_PROXY values', async (t) => {
  t.equal(loadConfig({}).trustProxy, undefined)
  t.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2, 'a hop count')
  t.same(loadConfig({ TRUST_PROXY: '10.0.0.1, 10.1.0.0/16,fd00::/8' }).trustProxy, ['10.0.0.1', '10.1.0.0/16', 'fd00::/8'])
  t.same(loadConfig({ TRUST_PROXY: 'loopback,uniquelocal' }).trustProxy, ['loopback', 'uniquelocal'])
  for (const value of ['yes', '10.0.0.0/33', '::1/129', '10.0.0.1/8/1', '10.0.0.1,', '1.5', '300.1.1.1']) {
    t.throws(() => loadConfig({ TRUST_PROXY: value }),
      new ConfigError(`Invalid TRUST_PROXY: must be a hop count or a comma-separated list of IP addresses or CIDR ranges (got ${JSON.stringify(value)})`), value)
  }
})
