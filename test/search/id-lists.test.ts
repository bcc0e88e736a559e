// drizzle/0015 and src/search/id-lists.ts: a term's ids come back as unordered lists, gathered by parallel
// workers on PostgreSQL, and are put in each page order in the service. Whatever order the lists arrive in,
// the result must be the order the database itself gives the page: the key in its collation or the enum's
// order, NULL subjects last ascending and first descending, ties by ascending id.
import { sql } from 'drizzle-orm'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import type { MessageSort } from '../../src/schemas/messages.js'
import { idListsSql, matchColumns, orderedIds, type IdListRow } from '../../src/search/id-lists.js'
import { build } from '../helpers/build.js'
import { createAuthor, queryRows } from '../helpers/fixtures.js'

const COLUMNS: Record<MessageSort, string> = { id: 'id', createdAt: 'created_at', priority: 'priority', subject: 'subject' }
const ORDERS = ['asc', 'desc'] as const
const VERSION = 41

type Db = App['db']

/** The matches' ids in the page order of `sort` and `order`, as the service puts the lists in order. */
async function listed (db: Db, sort: MessageSort, order: 'asc' | 'desc', word: string): Promise<{ version: number, ids: number[] }> {
  const matching = sql`SELECT ${matchColumns(sort)} FROM messages s WHERE s.content LIKE ${`%${word}%`}`
  const rows = await queryRows<IdListRow>(db, idListsSql(sort, order, matching, sql`${VERSION}`))
  return { version: rows[0]!.version, ids: Array.from(await orderedIds(rows, sort, order)) }
}

/** The same, ordered by the database: the oracle, written out rather than taken from the page code. */
async function ordered (db: Db, sort: MessageSort, order: 'asc' | 'desc', word: string): Promise<number[]> {
  const by = sort === 'id' ? `id ${order}` : `${COLUMNS[sort]} ${order}, id asc`
  const rows = await queryRows<{ id: number }>(db, sql`SELECT id::float8 AS id FROM messages WHERE content LIKE ${`%${word}%`} ORDER BY ${sql.raw(by)}`)
  return rows.map((row) => Number(row.id))
}

async function checkEveryOrder (t: Test, db: Db, label: string): Promise<void> {
  for (const sort of Object.keys(COLUMNS) as MessageSort[]) {
    for (const order of ORDERS) {
      const expected = await ordered(db, sort, order, 'kitchen')
      const got = await listed(db, sort, order, 'kitchen')
      t.equal(got.version, VERSION, `${label}: ${sort} ${order}, the version beside the lists`)
      t.same(got.ids, expected, `${label}: ${sort} ${order}, ${expected.length} ids in the database's order`)
      t.same(await listed(db, sort, order, 'no such word'), { version: VERSION, ids: [] }, `${label}: ${sort} ${order}, nothing matches`)
    }
  }
}

t.test('id lists in every page order', async (t) => {
  const app = await build(t, { testAuth: true })
  const author = await createAuthor(app, 'alice')
  // Ties in created_at (51 distinct times for 900 rows, one before 1970, whose microseconds are negative), subjects differing only in case, accents, a
  // trailing space, empty and NULL, and every priority; two thirds hold the word.
  await app.db.execute(sql`insert into messages (content, subject, priority, created_at, author_id)
    select case when g % 3 = 0 then 'nothing here ' || g else 'the kitchen report ' || g end,
      (array['apple', 'Apple', 'Äpfel', 'banana', 'zebra', 'zebra ', '', NULL, 'Zebra'])[1 + g % 9],
      (array['low', 'normal', 'high', 'urgent'])[1 + g % 4]::message_priority,
      case when g % 97 = 0 then timestamptz '1969-12-31 23:59:58.5+00'
        else timestamptz '2026-01-01 00:00:00+00' + ((g * 7919) % 50) * interval '1 second' end,
      ${author.id}
    from generate_series(1, 900) g`)
  // Rewritten rows move to other pages, so the table's physical order is not the ids' order.
  await app.db.execute(sql`update messages set content = content || ' again' where id % 4 = 0`)
  await checkEveryOrder(t, app.db, 'one backend')

  if ((process.env.TEST_DATABASE_URL ?? '') === '') return
  // PostgreSQL: parallel plans made free, so that the lists are gathered by workers and combined; the
  // table's statistics read, so that the planner knows it has rows to share out.
  await app.db.execute(sql`analyze messages`)
  await app.db.transaction(async (tx) => {
    for (const setting of ['parallel_setup_cost', 'parallel_tuple_cost', 'min_parallel_table_scan_size']) {
      await tx.execute(sql`select set_config(${setting}, '0', true)`)
    }
    const db = tx as unknown as Db
    const plan = await queryRows<{ 'QUERY PLAN': string }>(db, sql`EXPLAIN ${idListsSql('subject', 'asc',
      sql`SELECT ${matchColumns('subject')} FROM messages s WHERE s.content LIKE '%kitchen%'`, sql`${VERSION}`)}`)
    const text = plan.map((row) => row['QUERY PLAN']).join('\n')
    t.match(text, /Partial HashAggregate|Partial GroupAggregate/, 'each worker aggregates its own lists')
    t.match(text, /Workers Planned: [1-9]/, 'by workers')
    await checkEveryOrder(t, db, 'parallel workers')
  })
})
