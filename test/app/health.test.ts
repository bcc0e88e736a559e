import t from 'tap'
import type { App } from '../../src/app.js'
import { build } from '../helpers/build.js'
import { databaseOutage } from '../helpers/outage.js'

async function get (app: App, url: string) {
  const res = await app.inject({ method: 'GET', url })
  return { status: res.statusCode, body: res.json() }
}

const UNAVAILABLE = { status: 503, body: { error: 'Database unavailable' } }
const OK = { status: 200, body: { ok: true } }

t.test('GET /health and GET /health/ready', async (t) => {
  const app = await build(t)
  t.same(await get(app, '/health'), OK, 'SPEC 4.2: GET /health is 200 { ok: true }')
  t.same(await get(app, '/health/ready'), OK, 'CONTRACT 10: GET /health/ready is 200 { ok: true } when the database answers')
  const res = await app.inject({ method: 'GET', url: '/health' })
  t.same(Object.keys(res.json()), ['ok'], '/health has the one member ok')
})

// The database really stops answering; nothing is mocked (test/helpers/outage.ts, per driver).
t.test('GET /health/ready is 503 while the database does not answer, and recovers', async (t) => {
  const app = await build(t)
  t.same(await get(app, '/health/ready'), OK, 'ready before the outage')

  const outage = await databaseOutage(t, app)

  await outage.begin()
  // After a terminate the pool may need a request to notice; every answer must still be 503.
  for (let i = 1; i <= 3; i++) {
    t.same(await get(app, '/health/ready'), UNAVAILABLE, `during the outage (${i}): 503 { error: "Database unavailable" }`)
  }
  t.same(await get(app, '/health'), OK, 'liveness does not touch the database: /health stays 200')

  await outage.end()
  t.same(await get(app, '/health/ready'), OK, 'after the outage: ready again, without a restart')
})
