// The rolling-restart check (scripts/check-rolling-restart.sh) needs HAProxy and runs in .ci/run, not
// here; these are its two judgements that need neither: what it reads from HAProxy's log, and that
// every fault it exists to catch turns its verdict red.
import t from 'tap'
import { parseLogLine } from '../../scripts/deploy-checks/haproxy.js'
import type { LivePhase, LiveResult } from '../../scripts/deploy-checks/live-clients.js'
import type { LoadResult } from '../../scripts/deploy-checks/load.js'
import { renderReport, verdicts, type Report } from '../../scripts/rolling-restart/report.js'

t.test('HAProxy log lines: retries, redispatches and server state changes', async (t) => {
  const request = (retries: string): string =>
    `127.0.0.1:50394 [24/Nov/2026:05:25:44.076] http api/api-1 0/0/0/123/123 200 1138 - - ---- 17/17/15/4/${retries} 0/0 "GET /v2/messages/13996 HTTP/1.1"`
  t.same(parseLogLine(request('0')), { retries: 0, redispatched: false })
  t.same(parseLogLine(request('2')), { retries: 2, redispatched: false })
  t.same(parseLogLine(request('+1')), { retries: 1, redispatched: true })
  t.same(parseLogLine('[WARNING]  (6668) : Server api/api-1 is DOWN, reason: Layer4 connection problem, info: "Connection refused", check duration: 0ms. 2 active and 0 backup servers left.'),
    { server: 'api-1', state: 'DOWN' })
  t.same(parseLogLine('Server api/api-3 is UP, reason: Layer7 check passed, code: 200, check duration: 26ms. 3 active and 0 backup servers online.'),
    { server: 'api-3', state: 'UP' })
  t.equal(parseLogLine('[NOTICE]   (6667) : New worker (6668) forked'), null)
})

function passingReport (): Report {
  const load: LoadResult = {
    reads: 100,
    failedReads: [],
    sentKeys: new Set(['k-1', 'k-2']),
    acked: new Map([['k-1', 11], ['k-2', 12]]),
    givenUp: [],
    clientRetries: 1,
    replayed: 1,
    samples: [{ phase: 'rest', kind: 'read', ms: 2 }, { phase: 'rolling', kind: 'read', ms: 9 }, { phase: 'crash', kind: 'post', ms: 30 }]
  }
  const phase = (over: Partial<LivePhase>): LivePhase =>
    ({ delivered: 0, lost: 0, sseReconnects: 0, longPollRetries: 0, sseDelays: [], longPollDelays: [], ...over })
  const live: LiveResult = {
    sse: 2,
    longPolls: 2,
    answers: 40,
    phases: {
      warmup: phase({}),
      rest: phase({ delivered: 4, sseDelays: [3, 4], longPollDelays: [5, 6] }),
      // p99 and max apart: 200 stream deliveries, one of them slow.
      rolling: phase({ delivered: 202, sseReconnects: 2, longPollRetries: 1, sseDelays: [...Array<number>(199).fill(8), 250], longPollDelays: [7, 12] }),
      crash: phase({}),
      before: phase({}),
      gap: phase({}),
      after: phase({})
    },
    equal: 4,
    mismatched: [],
    lostExamples: [],
    resyncs: 0,
    refused: []
  }
  return {
    node: 'v24.21.0',
    haproxy: '2.6.12',
    config: 'deploy/haproxy.cfg',
    messages: 20_000,
    rate: 150,
    load,
    live,
    restarts: [
      { instance: 'api-1', how: 'SIGTERM', exit: 'exit 0', stoppedMs: 120, backMs: 4000 },
      { instance: 'api-2', how: 'SIGKILL', exit: 'killed by SIGKILL', stoppedMs: 1, backMs: 5000 }
    ],
    retries: { retried: 5, redispatched: 5 },
    verification: { ackedExactlyOnce: 2, ackedWrong: [], ackedMissing: 0, keysMoreThanOnce: 0, unknownMessages: 0, givenUpButWritten: 0 }
  }
}

t.test('a clean run passes every check, and the table shows each phase', async (t) => {
  const report = passingReport()
  t.same(verdicts(report).map((v) => v.ok), [true, true, true, true, true, true, true])
  const table = renderReport(report)
  t.match(table, '| Failed reads seen by the client | 0 of 100 | 0 ✔ |')
  t.match(table, '| At rest | 1 | 0 | 2.0 ms | – |')
  t.match(table, '| Rolling restart (SIGTERM, one at a time) | 1 | 0 | 9.0 ms | – |')
  t.match(table, '| Crash (SIGKILL) and restart | 0 | 1 | – | 30.0 ms |')
  t.match(table, 'HAProxy sent 5 requests again (5 to another instance)')
  t.match(table, '| Created messages a live client never received (clients × messages) | 0 of 206 | 0 ✔ |')
  t.match(table, '| Live clients whose copy equals `messages` at the end | 4 of 4 | all ✔ |')
  t.match(table, '| At rest | 4 | 0 | 0 | 0 | 4.0 ms / 4.0 ms | 6.0 ms / 6.0 ms |')
  t.match(table, '| Rolling restart (SIGTERM, one at a time) | 202 | 0 | 2 | 1 | 8.0 ms / 250.0 ms | 12.0 ms / 12.0 ms |')
  t.match(table, '| Crash (SIGKILL) and restart | 0 | 0 | 0 | 0 | – | – |')
})

t.test('each fault the check exists to catch fails its own line', async (t) => {
  const failing = (change: (report: Report) => void): string[] => {
    const report = passingReport()
    change(report)
    return verdicts(report).filter((v) => !v.ok).map((v) => v.name)
  }
  t.same(failing((r) => { r.load.failedReads.push({ phase: 'rolling', what: 'GET /v2/messages', outcome: '503' }) }),
    ['Failed reads seen by the client'])
  t.same(failing((r) => { r.load.givenUp.push({ phase: 'crash', what: 'POST /v2/messages (Idempotency-Key k-3)', outcome: 'UND_ERR_SOCKET' }) }),
    ['POSTs the client gave up on (3 retries, same key)'])
  t.same(failing((r) => { r.verification.ackedWrong.push('k-2: acknowledged id 12, messages [12,13]'); r.verification.ackedExactlyOnce = 1 }),
    ['Acknowledged keys found exactly once in `messages`, with the acknowledged id'])
  t.same(failing((r) => { r.verification.unknownMessages = 1 }), ['Messages written during the run without a key the client sent'])
  t.same(failing((r) => { (r.restarts[0] as Report['restarts'][number]).exit = 'exit 1' }), ['Instances stopped by SIGTERM that exited 0'])
  t.same(failing((r) => { r.live.phases.crash.lost = 1; r.live.lostExamples.push('sse-3: 20101 (crash)') }),
    ['Created messages a live client never received (clients × messages)'])
  t.same(failing((r) => { r.live.equal = 3; r.live.mismatched.push('long-poll-2: missing 20101') }),
    ['Live clients whose copy equals `messages` at the end'])
  // A run that measured nothing proves nothing.
  t.same(failing((r) => { r.load.reads = 0 }), ['Failed reads seen by the client'])
  t.same(failing((r) => { for (const p of Object.values(r.live.phases)) p.delivered = 0 }),
    ['Created messages a live client never received (clients × messages)'])
})
