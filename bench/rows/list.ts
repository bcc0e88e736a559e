/**
 * The list rows: page 1, a middle page and the last page at limit 25 and 100, one filtered and one search
 * page. Each is checked before and after its load against the oracle's exact page, and the Platformatic
 * peer is asked the same page (bench/servers/platformatic-peer.ts) and held to the same expectation.
 */
import { SEARCH_WORDS } from '../../scripts/seed.js'
import { pageProblem, type Answers, type PageExpectation, type PeerVerify } from '../checks/answer-checks.js'
import { platformaticPageProblem, platformaticPath } from '../servers/platformatic-peer.js'
import { DEFAULT_TARGETS, type Target } from '../report/bench-report.js'
import type { Row, RowBuilder } from './row.js'

const SEARCH_WORD: keyof typeof SEARCH_WORDS = 'quokka'

function listRow (answers: Answers, key: string, name: string, path: string, expect: PageExpectation, targets: readonly Target[]): Row {
  const peerPath = platformaticPath(path)
  const peerVerify: PeerVerify = (b, headers) => platformaticPageProblem(b, headers, expect)
  return {
    key,
    name,
    targets: [...targets, 'platformatic'],
    requests: () => [{ method: 'GET', path }],
    verify: (b) => pageProblem(b, expect),
    page: { path, expect },
    // Rows that write (POST, the writers beside the cold rows) grow the table between rows, and a
    // row measured again as another's reference runs after them: it expects the table as it is now.
    prepare: async () => {
      const now = await answers.expect(path)
      expect.total = now.total
      expect.ids = now.ids
    },
    platformatic: { requests: () => [{ method: 'GET', path: peerPath }], verify: peerVerify, page: peerPath }
  }
}

/** Page 1, the middle page and the last page of everything, at limit 25 and 100. */
export const pageRows: RowBuilder = async ({ answers, wanted, total }) => {
  const rows: Row[] = []
  for (const limit of [25, 100]) {
    const last = Math.max(1, Math.ceil(total / limit))
    const pages: Array<[string, string, number]> = [['page1', 'page 1', 1], ['middle', 'middle page', Math.ceil(last / 2)], ['last', 'last page', last]]
    for (const [label, text, page] of pages) {
      const key = `${label}-${limit}`
      if (!wanted(key)) continue
      const path = `/v2/messages?page=${page}&limit=${limit}`
      rows.push(listRow(answers, key, `list ${text} (${page}), limit ${limit}`, path, await answers.expect(path), page === 1 ? DEFAULT_TARGETS : ['service', 'baseline']))
    }
  }
  return rows
}

export const filteredRow: RowBuilder = async ({ answers, wanted }) => {
  if (!wanted('filtered')) return []
  const path = '/v2/messages?priority=high&page=1&limit=25'
  const expect = await answers.expect(path, (data) => data.every((m) => m.priority === 'high') ? undefined : 'an item that is not high priority')
  return [listRow(answers, 'filtered', 'priority=high, page 1, limit 25', path, expect, ['service', 'baseline'])]
}

export const searchRow: RowBuilder = async ({ answers, wanted, total }) => {
  if (!wanted('search')) return []
  const path = `/v2/messages/search?q=${SEARCH_WORD}&page=1&limit=25`
  const expect = await answers.expect(path,
    (data) => data.every((m) => `${String(m.content)} ${String(m.subject)}`.toLowerCase().includes(SEARCH_WORD)) ? undefined : `an item without "${SEARCH_WORD}"`)
  const share = total === 0 ? 0 : (answers.exact ? expect.total : await answers.total(path)) / total
  return [listRow(answers, 'search', `search "${SEARCH_WORD}" (${(share * 100).toFixed(1)}% of rows), page 1`, path, expect, ['service', 'baseline'])]
}
