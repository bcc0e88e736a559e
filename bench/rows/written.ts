/**
 * The cold rows under writes: a random page of the rows already there for each sort, each request
 * another one, while a writer creates WRITES_PER_SECOND messages through the API. Every write makes the
 * page cache and the anchors of the version before out of date, as on a messaging API in use.
 */
import { postBodies } from '../load/message-bodies.js'
import { expectPath, oracleAnswers } from '../checks/answer-checks.js'
import { EVERYTHING, type Oracle } from '../checks/reference-sql.js'
import { startWriter } from '../load/steady-writer.js'
import { COLD_LIMIT, randomPageRow, type ColdSort } from './cold.js'
import { requireOracle, type Row, type RowBuilder } from './row.js'

const WRITES_PER_SECOND = 20
// The orders a row written meanwhile sorts after every row already there (a new id is higher, its
// created time later, and it is written without a subject: NULL keys come last, by id). A page of the
// rows that were there stays the same page while the writer runs, so it can be checked exactly.
export const WRITTEN_SORTS: readonly ColdSort[] = [
  { key: 'writes-id', name: 'sort=id', query: '', target: 0.25 },
  { key: 'writes-created', name: 'sort=createdAt', query: '&sort=createdAt', target: 0.25 },
  { key: 'writes-subject', name: 'sort=subject', query: '&sort=subject', target: 0.1 }
]

/** One sort's row: the cold row of the rows already there, with a writer beside its load. */
function writtenRow (oracle: Oracle, sort: ColdSort, pages: number, maxRequests: number, token: string, bodies: string[]): Row {
  const row = randomPageRow(oracleAnswers(oracle), sort, pages, maxRequests)
  let before = 0
  return {
    ...row,
    name: `${row.name}, under ${WRITES_PER_SECOND} writes/s`,
    targets: ['service'],
    prepare: async () => { before = await oracle.count(EVERYTHING) },
    writer: (child) => startWriter(child.base, token, bodies, 1000 / WRITES_PER_SECOND, WRITES_PER_SECOND * 600),
    sequence: {
      ...row.sequence!,
      expect: async (path) => ({ ...await expectPath(oracle, path), total: before, totalUpTo: await oracle.count(EVERYTHING) })
    }
  }
}

export const writtenRows: RowBuilder = async ({ oracle: reader, wanted, total, maxRequests, tokens }) => {
  const sorts = WRITTEN_SORTS.filter((sort) => wanted(sort.key))
  if (sorts.length === 0) return []
  const oracle = requireOracle(reader, sorts[0]!.key)
  const [token] = await tokens.post('sync')
  // Full pages only: a new row could join a last page that is not.
  const pages = Math.max(1, Math.floor(total / COLD_LIMIT))
  const bodies = postBodies().map((body) => {
    const { subject: _subject, ...message } = JSON.parse(body) as Record<string, unknown>
    return JSON.stringify(message)
  })
  return sorts.map((sort) => writtenRow(oracle, sort, pages, maxRequests, token!, bodies))
}
