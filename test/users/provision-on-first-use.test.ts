import t from 'tap'
import { provisionOnFirstUse } from '../../src/users/provision-on-first-use.js'

/** An attempt that answers the listed results in turn, and a provisioner, both counting their calls. */
function scripted<T> (results: Array<T | null>) {
  const calls = { attempts: 0, provisions: 0 }
  return {
    calls,
    attempt: async () => results[calls.attempts++] ?? null,
    provision: async () => { calls.provisions++ }
  }
}

t.test('a known caller: the attempt alone, nothing provisioned', async (t) => {
  const { calls, attempt, provision } = scripted(['done'])
  t.equal(await provisionOnFirstUse(attempt, provision), 'done')
  t.same(calls, { attempts: 1, provisions: 0 })
})

t.test('an unknown caller: provisioned, then the attempt once more', async (t) => {
  const { calls, attempt, provision } = scripted([null, 'done'])
  t.equal(await provisionOnFirstUse(attempt, provision), 'done')
  t.same(calls, { attempts: 2, provisions: 1 })
})

t.test('a failed provisioning is the answer, and the attempt is not run again', async (t) => {
  const { calls, attempt } = scripted([null, 'done'])
  await t.rejects(provisionOnFirstUse(attempt, async () => { throw new Error('userinfo failed') }), { message: 'userinfo failed' })
  t.same(calls, { attempts: 1, provisions: 0 })
})

t.test('still unknown right after provisioning: a failure, not a third attempt', async (t) => {
  const { calls, attempt, provision } = scripted<string>([null, null, 'late'])
  await t.rejects(provisionOnFirstUse(attempt, provision), { message: 'local user vanished right after it was provisioned' })
  t.same(calls, { attempts: 2, provisions: 1 })
})
