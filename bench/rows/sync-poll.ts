/**
 * Delta sync (CONTRACT 12): a caught-up client polls and finds nothing new. The token must come from
 * the end of a whole walk: the first answers without `since` are the initial copy, not a poll. The walk
 * (some 12 s at 1,000,000 messages) is made just before the row, last of all: a full copy leaves the
 * service larger (see docs/journal/2026-11-24-reference-run-1m.md), which must not be charged to the rows before it.
 */
import { int } from '../report/bench-report.js'
import { followFeed, SYNC_LIMIT } from '../delta-sync/section.js'
import type { RowBuilder } from './row.js'

// A poll that finds nothing: no entry, a token, nothing more. The token differs per answer (it carries when it was issued).
const EMPTY_POLL = /^\{"data":\[\],"next":"[A-Za-z0-9_-]+","hasMore":false\}$/

export const syncPollRow: RowBuilder = async ({ wanted, service }) => {
  if (!wanted('sync-poll')) return []
  let next = ''
  return [{
    key: 'sync-poll',
    name: 'delta sync poll that finds nothing new (caught-up token)',
    targets: ['service'],
    async prepare () {
      process.stdout.write('bench: walking the change feed to its end for a caught-up token\n')
      const walk = await followFeed(service.base, undefined, SYNC_LIMIT)
      process.stdout.write(`bench: caught up after ${int(walk.calls)} calls\n`)
      next = walk.next
    },
    requests: () => [{ method: 'GET', path: `/v2/messages/changes?since=${encodeURIComponent(next)}` }],
    verify: (b) => EMPTY_POLL.test(b) ? undefined : `not an empty poll: ${b.slice(0, 80)}`,
    reference: { key: 'page1-25', target: 0.8 }
  }]
}
