import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import errors from '../../plugins/errors.js'
import rateLimit, { type RateLimitPluginOptions } from '../../plugins/rate-limit.js'
import type { AuthenticatedUser } from '../../plugins/auth.js'
import { REST_OF_WINDOW, restOfWindow } from '../helpers/rate-limit.js'

// plugins/rate-limit.ts on a bare Fastify: the error shape from plugins/errors.ts, and `request.user`
// as plugins/auth.ts decorates it (null, or the caller a route-level onRequest set).

const TOO_MANY = { error: 'Too many requests' }

async function appWith (t: Test, opts: RateLimitPluginOptions): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  app.decorateRequest('user', null)
  await app.register(errors, { development: false })
  await app.register(rateLimit, opts)
  // A caller named by the x-caller header, set as authentication would, before the limit's hook.
  const caller = async (request: { headers: Record<string, unknown>, user: AuthenticatedUser | null }): Promise<void> => {
    const sub = request.headers['x-caller']
    if (typeof sub === 'string') request.user = { sub, role: 'User' }
  }
  app.get('/ping', { onRequest: caller }, async () => ({ ok: true }))
  // A request refused before the limit's own hook (as a bad token is), counted all the same.
  app.get('/refused', async (request, reply) => {
    await app.countRefused(request, reply)
    return reply.code(401).send({ error: 'Invalid or missing token' })
  })
  await app.ready()
  return app
}

const get = async (app: FastifyInstance, url: string, headers: Record<string, string> = {}) => {
  const response = await app.inject({ method: 'GET', url, headers })
  return { status: response.statusCode, body: response.json(), retryAfter: restOfWindow(response.headers['retry-after']) }
}

t.test('max requests a minute per address; the next one is 429 with Retry-After', async (t) => {
  const app = await appWith(t, { max: 2 })
  t.same(await get(app, '/ping'), { status: 200, body: { ok: true }, retryAfter: undefined }, 'first')
  t.same(await get(app, '/ping'), { status: 200, body: { ok: true }, retryAfter: undefined }, 'second')
  t.same(await get(app, '/ping'), { status: 429, body: TOO_MANY, retryAfter: REST_OF_WINDOW }, 'third: 429')
})

t.test('an authenticated caller is counted by subject, not by the shared address', async (t) => {
  const app = await appWith(t, { max: 1 })
  t.same(await get(app, '/ping', { 'x-caller': 'alice' }), { status: 200, body: { ok: true }, retryAfter: undefined }, 'alice')
  t.same(await get(app, '/ping', { 'x-caller': 'bob' }), { status: 200, body: { ok: true }, retryAfter: undefined }, 'bob, same address')
  t.same(await get(app, '/ping'), { status: 200, body: { ok: true }, retryAfter: undefined }, 'anonymous, same address')
  t.same(await get(app, '/ping', { 'x-caller': 'alice' }), { status: 429, body: TOO_MANY, retryAfter: REST_OF_WINDOW }, 'alice again: 429')
  t.same(await get(app, '/ping'), { status: 429, body: TOO_MANY, retryAfter: REST_OF_WINDOW }, 'the address again: 429')
})

t.test('countRefused counts a refused request against its address', async (t) => {
  const app = await appWith(t, { max: 2 })
  t.same(await get(app, '/refused'), { status: 401, body: { error: 'Invalid or missing token' }, retryAfter: undefined }, 'first refusal')
  t.same(await get(app, '/refused'), { status: 401, body: { error: 'Invalid or missing token' }, retryAfter: undefined }, 'second refusal')
  t.same(await get(app, '/refused'), { status: 429, body: TOO_MANY, retryAfter: REST_OF_WINDOW }, 'third: 429')
  t.same(await get(app, '/ping'), { status: 429, body: TOO_MANY, retryAfter: REST_OF_WINDOW }, 'and the address is past its limit')
})

t.test('max 0 turns limiting off, countRefused included', async (t) => {
  const app = await appWith(t, { max: 0 })
  for (let i = 0; i < 5; i++) {
    t.same(await get(app, '/refused'), { status: 401, body: { error: 'Invalid or missing token' }, retryAfter: undefined }, `refusal ${i + 1}`)
  }
  t.same(await get(app, '/ping'), { status: 200, body: { ok: true }, retryAfter: undefined }, 'never 429')
})
