import { sql } from 'drizzle-orm'
import t, { type Test } from 'tap'
import { primaryOnly } from '../../src/db/read-router.js'
import { createIdempotencyRepository } from '../../src/idempotency/repository.js'
import { createMessagesRepository } from '../../src/messages/repository.js'
import type { Caller } from '../../src/users/local-user.js'
import { build } from '../helpers/build.js'
import { createAuthor, queryRows } from '../helpers/fixtures.js'

// messages.create is the whole of POST /v2/messages below the route (SPEC 5.5, CONTRACT 12): the
// caller's local user provisioned on first use, and the Idempotency-Key's stored answer.

const caller = (sub: string): Caller => ({ sub, role: 'User' })

/** A repository on the app's database whose local-user lookup is `localUser`, counting its calls. */
async function repository (t: Test, localUser: (caller: Caller) => Promise<unknown>) {
  const app = await build(t, { testAuth: true })
  const calls = { provisions: 0 }
  const messages = createMessagesRepository(app.db, primaryOnly(app.db), {
    localUser: async (who) => { calls.provisions++; return await localUser(who) },
    idempotency: createIdempotencyRepository(app.db, { ttlHours: 24 })
  })
  const count = async () => (await queryRows<{ n: number }>(app.db, sql`select count(*)::int as n from messages`))[0]?.n
  return { app, messages, calls, count }
}

t.test('a known caller: the write alone, nothing provisioned', async (t) => {
  const { app, messages, calls } = await repository(t, async () => { throw new Error('not called') })
  await createAuthor(app, 'known')
  const created = await messages.create(caller('known'), { content: 'hello' })
  t.match(created, { status: 201, replayed: false, body: { content: 'hello', author: { name: 'Name of known' } } })
  t.equal(created.location, `/v2/messages/${(created.body as { id: number }).id}`)
  t.same(calls, { provisions: 0 })
})

t.test('an unknown caller: provisioned, then the write once more', async (t) => {
  const { app, messages, calls, count } = await repository(t, async (who) => await createAuthor(app, who.sub))
  t.match(await messages.create(caller('first'), { content: 'first use' }), { status: 201, body: { author: { name: 'Name of first' } } })
  t.match(await messages.create(caller('keyed'), { content: 'first use' }, 'k1'), { status: 201, replayed: false, body: /"author":\{"id":\d+,"name":"Name of keyed"\}/ })
  t.same(calls, { provisions: 2 })
  t.equal(await count(), 2)
})

t.test('a failed provisioning is the answer, and the write is not tried again', async (t) => {
  const { messages, calls, count } = await repository(t, async () => { throw new Error('userinfo failed') })
  await t.rejects(messages.create(caller('nobody'), { content: 'never' }), { message: 'userinfo failed' })
  await t.rejects(messages.create(caller('nobody'), { content: 'never' }, 'k1'), { message: 'userinfo failed' })
  t.same(calls, { provisions: 2 })
  t.equal(await count(), 0)
  // The key's flight ended with the failure: the same key may be sent again.
  await t.rejects(messages.create(caller('nobody'), { content: 'never' }, 'k1'), { message: 'userinfo failed' })
})

t.test('still unknown right after provisioning: a failure, not a third attempt', async (t) => {
  const { messages, calls, count } = await repository(t, async () => undefined)
  await t.rejects(messages.create(caller('ghost'), { content: 'never' }), { message: 'local user vanished right after it was provisioned' })
  t.same(calls, { provisions: 1 })
  t.equal(await count(), 0)
})
