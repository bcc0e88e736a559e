import t from 'tap'
import { seedFromEnv } from '../helpers/exactness.js'
import { checkSearch, deleteBySql, insertMessagesBySql, postMessages, SEARCH_TERMS, updateContentBySql, world } from '../helpers/exactness-messages.js'

// Search pages and totals for terms of every selectivity, re-checked right after SQL writes that
// change which rows match: no answer may come from a stale cache.

const seed = seedFromEnv()
t.comment(`exactness seed ${seed} (replay with EXACTNESS_SEED=${seed})`)

t.test('search stays exact: selective and common terms, wildcards, case, SQL content updates', async (t) => {
  const w = await world(t, seed)
  await postMessages(t, w, 20)
  await insertMessagesBySql(w, 600)
  await checkSearch(t, w, 'after inserts', SEARCH_TERMS)

  // The same requests again right after writes: a cache must never serve the earlier answer.
  await updateContentBySql(w)
  await checkSearch(t, w, 'after content updates', ['lorem', 'zyzzyva', 'ipsum', 'mps ipsum'])
  await deleteBySql(w)
  await postMessages(t, w, 5)
  await checkSearch(t, w, 'after deletes', ['lorem', 'zyzzyva', 'MiXeD'])
})
