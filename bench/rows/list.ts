/**
 * The list rows: page 1, a middle page and the last page at limit 25 and 100, one filtered and one search
 * page. Each is checked before and after its load against the oracle's exact page, and the Platformatic
 * peer is asked the same page (bench/servers/platformatic-peer.ts) and held to the same expectation.
 */
import { SEARCH_WORDS } from '../../scripts/seed.js'
import { expectPage, expectPath, pageProblem, searchWhere, type PageExpectation, type PeerVerify } from '../checks/answer-checks.js'
import { EVERYTHING, type Oracle } from '../checks/reference-sql.js'
import { platformaticPageProblem, platformaticPath } from '../servers/platformatic-peer.js'
import { DEFAULT_TARGETS, type Target } from '../report/bench-report.js'
import type { Row, RowBuilder } from './row.js'

const SEARCH_WORD: keyof typeof SEARCH_WORDS = 'quokka'

function listRow (oracle: Oracle, key: string, name: string, path: string, expect: PageExpectation, targets: readonly Target[]): Row {
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
      const now = await expectPath(oracle, path)
      expect.total = now.total
      expect.ids = now.ids
    },
    platformatic: { requests: () => [{ method: 'GET', path: peerPath }], verify: peerVerify, page: peerPath }
  }
}

/** Page 1, the middle page and the last page of everything, at limit 25 and 100. */
export const pageRows: RowBuilder = async ({ oracle, wanted, total }) => {
  const rows: Row[] = []
  for (const limit of [25, 100]) {
    const last = Math.max(1, Math.ceil(total / limit))
    const pages: Array<[string, string, number]> = [['page1', 'page 1', 1], ['middle', 'middle page', Math.ceil(last / 2)], ['last', 'last page', last]]
    for (const [label, text, page] of pages) {
      const key = `${label}-${limit}`
      if (!wanted(key)) continue
      const expect = await expectPage(oracle, EVERYTHING, page, limit)
      rows.push(listRow(oracle, key, `list ${text} (${page}), limit ${limit}`, `/v2/messages?page=${page}&limit=${limit}`, expect, page === 1 ? DEFAULT_TARGETS : ['service', 'baseline']))
    }
  }
  return rows
}

export const filteredRow: RowBuilder = async ({ oracle, wanted }) => {
  if (!wanted('filtered')) return []
  const expect = await expectPage(oracle, { text: "priority = 'high'", params: [] }, 1, 25,
    (data) => data.every((m) => m.priority === 'high') ? undefined : 'an item that is not high priority')
  return [listRow(oracle, 'filtered', 'priority=high, page 1, limit 25', '/v2/messages?priority=high&page=1&limit=25', expect, ['service', 'baseline'])]
}

export const searchRow: RowBuilder = async ({ oracle, wanted, total }) => {
  if (!wanted('search')) return []
  const expect = await expectPage(oracle, searchWhere(SEARCH_WORD), 1, 25,
    (data) => data.every((m) => `${String(m.content)} ${String(m.subject)}`.toLowerCase().includes(SEARCH_WORD)) ? undefined : `an item without "${SEARCH_WORD}"`)
  const share = total === 0 ? 0 : expect.total / total
  return [listRow(oracle, 'search', `search "${SEARCH_WORD}" (${(share * 100).toFixed(1)}% of rows), page 1`, `/v2/messages/search?q=${SEARCH_WORD}&page=1&limit=25`, expect, ['service', 'baseline'])]
}
