/**
 * The cold rows: a random page for each sort, and a random rare phrase for search, each request another one
 * (see Sequence), compared with warm page 1 of the same run.
 */
import { rarePhrases } from '../../scripts/seed.js'
import { expectPath } from '../checks/answer-checks.js'
import type { Oracle } from '../checks/reference-sql.js'
import { int } from '../report/bench-report.js'
import { shuffled } from '../load/cold-order.js'
import type { Row, RowBuilder } from './row.js'

export const COLD_LIMIT = 25
export const COLD_SEED = 18

/** A sort of the cold rows: its row key, its name, the query string it adds, its ratio to page 1. */
export interface ColdSort { key: string, name: string, query: string, target: number }
export const COLD_SORTS: readonly ColdSort[] = [
  { key: 'random-id', name: 'sort=id', query: '', target: 0.25 },
  { key: 'random-created', name: 'sort=createdAt desc', query: '&sort=createdAt&order=desc', target: 0.25 },
  { key: 'random-subject', name: 'sort=subject', query: '&sort=subject', target: 0.1 }
]

/** A random page of `pages` in `sort` each request, in the fixed-seed order, checked against the oracle. */
export function randomPageRow (oracle: Oracle, sort: ColdSort, pages: number, maxRequests: number): Row {
  return {
    key: sort.key,
    name: `random page of ${int(pages)}, ${sort.name}, limit ${COLD_LIMIT}`,
    targets: ['service', 'baseline'],
    requests: () => [],
    sequence: {
      paths: shuffled(pages, maxRequests, COLD_SEED).map((page) => `/v2/messages?page=${page}&limit=${COLD_LIMIT}${sort.query}`),
      expect: async (path) => await expectPath(oracle, path)
    },
    reference: { key: 'page1-25', target: sort.target }
  }
}

function randomSearchRow (oracle: Oracle, maxRequests: number): Row {
  const phrases = rarePhrases()
  return {
    key: 'random-search',
    name: `search, a random rare phrase of ${int(phrases.length)} each request, page 1`,
    targets: ['service', 'baseline'],
    requests: () => [],
    sequence: {
      paths: shuffled(phrases.length, maxRequests, COLD_SEED).map((n) => `/v2/messages/search?q=${encodeURIComponent(phrases[n - 1]!)}&page=1&limit=${COLD_LIMIT}`),
      expect: async (path) => await expectPath(oracle, path)
    },
    reference: { key: 'page1-25', target: 0.05 }
  }
}

export const coldRows: RowBuilder = async ({ oracle, wanted, total, maxRequests }) => {
  const rows: Row[] = []
  const pages = Math.max(1, Math.ceil(total / COLD_LIMIT))
  for (const sort of COLD_SORTS) {
    if (wanted(sort.key)) rows.push(randomPageRow(oracle, sort, pages, maxRequests))
  }
  if (wanted('random-search')) rows.push(randomSearchRow(oracle, maxRequests))
  return rows
}
