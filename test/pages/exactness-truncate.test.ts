import t from 'tap'
import { assertExact, run, seedFromEnv } from '../helpers/exactness.js'
import { checkList, checkSearch, combinations, filters, insertMessagesBySql, postMessages, world } from '../helpers/exactness-messages.js'

// TRUNCATE resets every count and index; pages and totals must start over exactly.

const seed = seedFromEnv()
t.comment(`exactness seed ${seed} (replay with EXACTNESS_SEED=${seed})`)

t.test('truncate and reinsert: totals and pages start over exactly', async (t) => {
  const w = await world(t, seed)
  await insertMessagesBySql(w, 300)
  await postMessages(t, w, 5)
  await checkList(t, w, 'before truncate')
  await run(w.app, 'TRUNCATE messages')
  await assertExact(t, w.app, w.rng, 'right after truncate', combinations('/v2/messages', (await filters(w)).slice(0, 2), { params: {}, where: 'TRUE' }))
  await checkSearch(t, w, 'right after truncate', ['lorem'])
  await insertMessagesBySql(w, 250)
  await postMessages(t, w, 5)
  await checkList(t, w, 'after reinsert')
  await checkSearch(t, w, 'after reinsert', ['lorem', 'zyzzyva'])
})
