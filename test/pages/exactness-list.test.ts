import t from 'tap'
import { seedFromEnv } from '../helpers/exactness.js'
import { checkList, deleteBySql, deleteThroughApi, insertMessagesBySql, insertUsersBySql, postMessages, renameAuthorsBySql, updateBySql, world } from '../helpers/exactness-messages.js'

// Messages list pages and totals after inserts, deletes and updates made through the API and by SQL,
// compared with a naive ORDER BY ... LIMIT/OFFSET and count(*) on the same database.

const seed = seedFromEnv()
t.comment(`exactness seed ${seed} (replay with EXACTNESS_SEED=${seed})`)

t.test('list pages and totals stay exact through API and SQL writes', async (t) => {
  const w = await world(t, seed)
  await postMessages(t, w, 30)
  await insertMessagesBySql(w, 700)
  await postMessages(t, w, 10)
  await checkList(t, w, 'after inserts')

  await deleteThroughApi(t, w, 10)
  await deleteBySql(w)
  await checkList(t, w, 'after deletes')

  await updateBySql(w)
  await insertUsersBySql(w, 3)
  await insertMessagesBySql(w, 200)
  await postMessages(t, w, 10)
  await checkList(t, w, 'after updates and more inserts')

  await renameAuthorsBySql(w)
  await checkList(t, w, 'after authors renamed by SQL')
})
