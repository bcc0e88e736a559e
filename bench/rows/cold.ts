/**
 * The cold rows: a random page for each sort, a random rare phrase for search, and a common word in each
 * sort, each request another one (see Sequence), compared with warm page 1 of the same run.
 */
import { rarePhrases } from '../../scripts/seed.js'
import type { Answers } from '../checks/answer-checks.js'
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
  { key: 'random-subject', name: 'sort=subject', query: '&sort=subject', target: 0.1 },
  { key: 'random-priority', name: 'sort=priority desc', query: '&sort=priority&order=desc', target: 0.1 }
]

/** A random page of `pages` in `sort` each request, in the fixed-seed order, its sampled answers checked after the row. */
export function randomPageRow (answers: Answers, sort: ColdSort, pages: number, maxRequests: number): Row {
  return {
    key: sort.key,
    name: `random page of ${int(pages)}, ${sort.name}, limit ${COLD_LIMIT}`,
    targets: ['service', 'baseline'],
    requests: () => [],
    sequence: {
      paths: shuffled(pages, maxRequests, COLD_SEED).map((page) => `/v2/messages?page=${page}&limit=${COLD_LIMIT}${sort.query}`),
      expect: async (path) => await answers.expect(path)
    },
    reference: { key: 'page1-25', target: sort.target }
  }
}

/** Every page that starts before offset `below`, at every limit up to `maxLimit`: its page and limit. */
function pagesNearStart (below: number, maxLimit: number): Array<{ page: number, limit: number }> {
  const pages: Array<{ page: number, limit: number }> = []
  for (let limit = 1; limit <= maxLimit; limit++) {
    for (let page = 1; (page - 1) * limit < below; page++) pages.push({ page, limit })
  }
  return pages
}

export const NEAR_DESC_KEY = 'near-subject-desc'

/**
 * Pages before offset 1,000 by subject, descending, where ties run against the (subject, id) index:
 * each request another page and limit, so that none is answered from the page cache.
 */
function nearDescRow (answers: Answers, maxRequests: number): Row {
  const pages = pagesNearStart(1000, 100)
  return {
    key: NEAR_DESC_KEY,
    name: `a page before offset 1,000, sort=subject desc, one of ${int(pages.length)} pages and limits each request`,
    targets: ['service', 'baseline'],
    requests: () => [],
    sequence: {
      paths: shuffled(pages.length, maxRequests, COLD_SEED).map((n) => pages[n - 1]!)
        .map(({ page, limit }) => `/v2/messages?page=${page}&limit=${limit}&sort=subject&order=desc`),
      expect: async (path) => await answers.expect(path)
    },
    // Such a page reads its offset's rows as well as its own: some 550 on average, page 1 25.
    reference: { key: 'page1-25', target: 0.05 }
  }
}

function randomSearchRow (answers: Answers, maxRequests: number): Row {
  const phrases = rarePhrases()
  return {
    key: 'random-search',
    name: `search, a random rare phrase of ${int(phrases.length)} each request, page 1`,
    targets: ['service', 'baseline'],
    requests: () => [],
    sequence: {
      paths: shuffled(phrases.length, maxRequests, COLD_SEED).map((n) => `/v2/messages/search?q=${encodeURIComponent(phrases[n - 1]!)}&page=1&limit=${COLD_LIMIT}`),
      expect: async (path) => await answers.expect(path)
    },
    reference: { key: 'page1-25', target: 0.05 }
  }
}

/**
 * Words the seed's sentences hold in 5 to 10 % of messages each (counted at 1,000,000: `tested` 5.2 %
 * to `kitchen` 10.1 %). Each is a common word whose ids nothing has read yet.
 */
export const COMMON_WORDS = ['tested', 'cancelled', 'postponed', 'moved', 'reviewed', 'merged', 'scheduled', 'approved', 'fixed',
  'archived', 'booked', 'deployed', 'restarted', 'checked', 'signed', 'badge', 'kitchen'] as const
const COMMON_SORTS = ['', '&sort=createdAt&order=desc', '&sort=subject', '&sort=priority'] as const

/**
 * Page 1 of a common word's search, in each sort: every request reads another word's or sort's ids
 * (68 in all, in the fixed-seed order), so none is answered from what an earlier one read. The row
 * ends with its sequence; its latencies are those of first requests.
 */
function commonWordsRow (answers: Answers): Row {
  const paths = COMMON_WORDS.flatMap((word) => COMMON_SORTS.map((sort) => `/v2/messages/search?q=${word}&page=1&limit=${COLD_LIMIT}${sort}`))
  return {
    key: 'common-words',
    name: `search, a common word (5-10 % of messages) in one of 4 sorts, ${paths.length} different, page 1`,
    targets: ['service', 'baseline'],
    requests: () => [],
    sequence: {
      paths: shuffled(paths.length, paths.length, COLD_SEED).map((n) => paths[n - 1]!),
      expect: async (path) => await answers.expect(path)
    },
    reference: { key: 'page1-25', target: 0.01 }
  }
}

export const coldRows: RowBuilder = async ({ answers, wanted, total, maxRequests }) => {
  const rows: Row[] = []
  const pages = Math.max(1, Math.ceil(total / COLD_LIMIT))
  for (const sort of COLD_SORTS) {
    if (wanted(sort.key)) rows.push(randomPageRow(answers, sort, pages, maxRequests))
  }
  if (wanted(NEAR_DESC_KEY)) rows.push(nearDescRow(answers, maxRequests))
  if (wanted('random-search')) rows.push(randomSearchRow(answers, maxRequests))
  if (wanted('common-words')) rows.push(commonWordsRow(answers))
  return rows
}
