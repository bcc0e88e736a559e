import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import type { Database } from '../../src/db/client.js'
import { BACKGROUND } from '../../src/db/heavy-reads.js'
import { MESSAGE_COLLECTION, type ReaderFilter } from '../../src/messages/collection.js'
import type { MessageRow } from '../../src/messages/row.js'
import { STRIDE } from '../../src/pages/anchors/anchor-set.js'
import { filterParams, presentFilters } from '../../src/pages/filters.js'
import { readerParts, type CollectionReaderOptions } from '../../src/pages/reader.js'
import type { PageRequest } from '../../src/pages/request.js'
import type { FilterValues } from '../../src/pages/spec.js'
import type { PageAsk } from '../../src/pages/strategies/strategy.js'
import { parseStrategiesOff } from '../../src/pages/strategies/switches.js'
import { applicable, PAGE_STRATEGIES, readPage } from '../../src/pages/strategies/table.js'
import type { MessageSort } from '../../src/schemas/messages.js'
import { watchDeepPageReads } from '../helpers/deep-page-reads.js'
import { rawRows, seedFromEnv } from '../helpers/exactness.js'
import { insertMessagesBySql, world } from '../helpers/exactness-messages.js'

// The ways of reading a page (src/pages/strategies/table.ts): the order they are tried in, which one
// serves which shape of request, and that a page the counters serve starts no read of anchors.

const seed = seedFromEnv()

type Parts = ReturnType<typeof readerParts<MessageSort, ReaderFilter, MessageRow>>

interface Shape { sort: MessageSort, order?: 'asc' | 'desc', offset?: number, values?: FilterValues<ReaderFilter>, cursor?: true }

function askOf (parts: Parts, db: Database, shape: Shape): PageAsk<MessageSort, ReaderFilter, MessageRow> {
  const values = shape.values ?? {}
  const present = presentFilters(MESSAGE_COLLECTION, values)!
  const page: PageRequest<MessageSort> = {
    collection: 'messages',
    page: 1,
    limit: 25,
    offset: shape.offset ?? 0,
    sort: shape.sort,
    order: shape.order ?? 'asc',
    cursor: shape.cursor === true ? { key: null, id: 10, direction: 'after' } : null,
    filters: ''
  }
  return { reader: parts, db, page, present, params: filterParams(MESSAGE_COLLECTION, present, values), asker: BACKGROUND, companion: undefined }
}

t.test('the strategies, in the order they are tried', async (t) => {
  t.strictSame(PAGE_STRATEGIES.map((strategy) => strategy.name),
    ['cursor', 'start-sought', 'start', 'located', 'grouped', 'anchored', 'followed', 'awaited', 'walked'])
})

t.test('which strategy serves which request, before anything is held', async (t) => {
  // No statement runs to choose: any handle will do.
  const db = {} as unknown as Database
  const serving = (shape: Shape, options: CollectionReaderOptions = {}): string[] => applicable(askOf(readerParts(MESSAGE_COLLECTION, options), db, shape))
  const deep = 5000
  const cases: Array<[string, Shape, CollectionReaderOptions, string[]]> = [
    ['a page by cursor', { sort: 'id', cursor: true }, {}, ['cursor']],
    ['page 1 by id', { sort: 'id' }, {}, ['start', 'located', 'awaited', 'walked']],
    ['near the start, descending by subject', { sort: 'subject', order: 'desc', offset: 500 }, {}, ['start-sought', 'start', 'grouped', 'awaited', 'walked']],
    ['near the start, descending by subject, of one priority', { sort: 'subject', order: 'desc', values: { priority: 'high' } }, {}, ['start-sought', 'start', 'awaited', 'walked']],
    ['near the start, descending by subject, of one author', { sort: 'subject', order: 'desc', values: { authorId: 3 } }, {}, ['start', 'awaited', 'walked']],
    ['deep, by created time descending', { sort: 'createdAt', order: 'desc', offset: deep }, {}, ['located', 'awaited', 'walked']],
    ['deep, by id, of one priority', { sort: 'id', offset: deep, values: { priority: 'low' } }, {}, ['located', 'awaited', 'walked']],
    ['deep, by subject', { sort: 'subject', offset: deep }, {}, ['grouped', 'awaited', 'walked']],
    ['deep, by priority descending', { sort: 'priority', order: 'desc', offset: deep }, {}, ['grouped', 'awaited', 'walked']],
    ['deep, by subject, of one priority', { sort: 'subject', offset: deep, values: { priority: 'normal' } }, {}, ['awaited', 'walked']],
    ['deep, by id, of one author', { sort: 'id', offset: deep, values: { authorId: 3 } }, {}, ['awaited', 'walked']],
    ['deep, by subject, of one priority, without anchors', { sort: 'subject', offset: deep, values: { priority: 'normal' } }, { anchors: false }, ['walked']],
    ['deep, by created time, with located off', { sort: 'createdAt', order: 'desc', offset: deep }, { off: ['located'] }, ['awaited', 'walked']],
    ['deep, by subject, with grouped and awaited off', { sort: 'subject', offset: deep }, { off: ['grouped', 'awaited'] }, ['walked']],
    ['near the start, descending by subject, with start-sought off', { sort: 'subject', order: 'desc' }, { off: ['start-sought'] }, ['start', 'grouped', 'awaited', 'walked']]
  ]
  for (const [label, shape, options, expected] of cases) t.strictSame(serving(shape, options), expected, `${label}: ${expected[0]}`)
  t.strictSame(parseStrategiesOff('grouped, located'), ['grouped', 'located'], 'PAGE_STRATEGIES_OFF names them')
  t.strictSame(parseStrategiesOff('cursor'), { unknown: 'cursor' }, 'the seek by cursor cannot be turned off')
})

t.test('a page the counters serve starts no read of anchors; a page only anchors or a walk can serve does', async (t) => {
  const w = await world(t, seed)
  await insertMessagesBySql(w, 4000)
  const parts: Parts = readerParts(MESSAGE_COLLECTION, { anchorChunk: STRIDE })
  const vias = watchDeepPageReads(t)
  const check = async (shape: Shape, where: string, order: string): Promise<{ ask: PageAsk<MessageSort, ReaderFilter, MessageRow>, via: string | undefined }> => {
    const ask = askOf(parts, w.app.db, shape)
    const before = vias.length
    const got = await readPage(ask)
    const want = (await rawRows<{ id: number }>(w.app, `SELECT id::int AS id FROM messages WHERE ${where} ORDER BY ${order} OFFSET ${ask.page.offset} LIMIT 25`)).map((row) => Number(row.id))
    t.strictSame(got.rows.map((row) => Number(row.id)), want, `${JSON.stringify(shape)}: the table's page`)
    return { ask, via: vias.slice(before).map((read) => read.via).join() }
  }

  for (const [shape, order] of [
    [{ sort: 'createdAt', order: 'desc', offset: 2000 }, 'created_at DESC, id'],
    [{ sort: 'id', offset: 3100, values: { priority: 'low' } }, 'id'],
    [{ sort: 'subject', offset: 1500 }, 'subject, id']
  ] as Array<[Shape, string]>) {
    const where = shape.values?.priority === undefined ? 'TRUE' : `priority = '${shape.values.priority}'`
    const { ask, via } = await check(shape, where, order)
    t.equal(via, 'rank', 'located in the counters')
    t.notOk(parts.anchors!.reading(ask.db, ask.page, ask.params), 'and no read of anchors under way')
    t.ok(parts.anchors!.awaits(ask.db, ask.page, ask.params), 'nor any held')
  }

  const shape: Shape = { sort: 'subject', offset: 1000, values: { priority: 'normal' } }
  const { ask, via } = await check(shape, "priority = 'normal'", 'subject, id')
  t.equal(via, 'anchor', 'a page of a sort the counters do not serve waits for its anchors and is read from them')
  t.notOk(parts.anchors!.awaits(ask.db, ask.page, ask.params), 'which are held')
  // The rest of the set is read in the background: let it end before the database closes.
  while (parts.anchors!.reading(ask.db, ask.page, ask.params)) await sleep(10)
})
