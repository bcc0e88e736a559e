// drizzle/0014: the search indexes keep new messages in pending lists of up to 32 MB, which the service
// merges in the background (src/search/pending-lists.ts); a message is found before and after the merge.
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import t from 'tap'
import { mergePendingLists } from '../../src/search/pending-lists.js'
import { buildApp } from '../../src/app.js'
import { build, testConfig } from '../helpers/build.js'
import { createAuthor, queryRows } from '../helpers/fixtures.js'
import { postgresDatabase } from '../helpers/database.js'

// The advisory lock search_pending_lists_merge() takes (drizzle/0014).
const MERGE_LOCK = 7300452034
const GIN_INDEXES = ['messages_content_joins_idx', 'messages_content_words_trgm_idx', 'messages_subject_trgm_idx']

t.test('the search indexes take 32 MB pending lists, merged on request, and search reads both sides', async (t) => {
  const app = await build(t, { testAuth: true })
  const options = await queryRows<{ relname: string, reloptions: string[] }>(app.db, sql`
    select c.relname, c.reloptions from pg_class c join pg_index i on i.indexrelid = c.oid join pg_am a on a.oid = c.relam
    where i.indrelid = 'messages'::regclass and a.amname = 'gin' order by c.relname`)
  t.same(options.map((o) => o.relname), GIN_INDEXES, 'the three GIN indexes of messages')
  for (const o of options) t.same([...o.reloptions].sort(), ['fastupdate=on', 'gin_pending_list_limit=32768'], o.relname)

  const author = await createAuthor(app, 'alice')
  await mergePendingLists(app.db)
  t.equal(await mergePendingLists(app.db), 0, 'nothing pending: nothing merged')
  const found = async (): Promise<unknown> => {
    const res = await app.inject({ url: '/v2/messages/search?q=wombat%20report&limit=1', headers: { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User' }) } })
    t.equal(res.statusCode, 200)
    return (res.json() as { pagination: { total: number } }).pagination.total
  }
  // One transaction that holds the merge's lock, so that the service's own merge (every 5 s) cannot take the
  // lists between the insert and the merge asked for here, however long the steps take.
  await app.db.transaction(async (transaction) => {
    const tx = transaction as unknown as typeof app.db
    await tx.execute(sql`select pg_advisory_xact_lock(${MERGE_LOCK})`)
    // Written by SQL, as any client may: the triggers count them and the indexes take them into their lists.
    await tx.execute(sql`insert into messages (content, subject, author_id)
      select 'a wombat report number ' || g, 'Wombat weekly ' || (g % 7), ${author.id} from generate_series(1, 400) g`)
    await tx.execute(sql`set local enable_seqscan = off`)
    const [pending] = await queryRows<{ n: number }>(tx, sql`select count(*)::int as n from messages where replace(lower(content), ' ', '0') like '%wombat0report%'`)
    t.equal(pending!.n, 400, 'found through the index while pending')
    const merged = await mergePendingLists(tx)
    t.ok(merged > 0, `the pending pages were merged (${merged})`)
  })
  t.equal(await found(), 400, 'found through the search after the merge')
  t.equal(await mergePendingLists(app.db), 0, 'and are gone')
  await app.db.execute(sql`insert into messages (content, author_id) values ('one more wombat report', ${author.id})`)
  t.equal(await found(), 401, 'found after the merge, with the message added since')
})

// A second connection to the same database: on PGlite suites a throwaway PostgreSQL server (postgresDatabase).
t.test('one merge at a time across instances: the other returns at once', async (t) => {
  const databaseUrl = await postgresDatabase(t)
  const app = await buildApp(testConfig({ databaseUrl }), { logger: false, testAuth: true })
  t.teardown(() => app.close())
  const other = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  t.teardown(async () => { await other.end() })
  const author = await createAuthor(app, 'bob')
  await app.db.execute(sql`insert into messages (content, author_id) select 'pending ' || g, ${author.id} from generate_series(1, 50) g`)
  await other.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(7300452034)`
    t.equal(await mergePendingLists(app.db), 0, 'another merge holds the lock: nothing merged, nothing waited for')
  })
  t.ok(await mergePendingLists(app.db) > 0, 'merged once the other is done')
})
