import type { LiveResult } from '../deploy-checks/live-clients.js'
import type { Answer, LoadResult } from '../deploy-checks/load.js'
import type { Verification } from '../deploy-checks/verify.js'

export type FailoverPhase = 'before' | 'gap' | 'after'

export const FAILOVER_PHASES: Array<{ phase: FailoverPhase, title: string }> = [
  { phase: 'before', title: 'Before (a primary, b synchronous standby)' },
  { phase: 'gap', title: 'Gap (a killed, no primary)' },
  { phase: 'after', title: 'After promotion of b' }
]

// An answer slower than this is a hang: with no primary the service answers 503 at once.
export const HANG_MS = 10_000
// From `pg_ctl promote` to the first acknowledged write, at most.
export const FIRST_WRITE_WITHIN_MS = 10_000

export interface Stale {
  /** 200 reads sent after the promotion (list pages, search, by-id). */
  checked: number
  /** Lines describing each stale answer (an id b does not have, a total outside the bounds). */
  examples: string[]
  count: number
}

export interface FailoverReport {
  node: string
  haproxy: string
  postgres: string
  config: string
  messages: number
  rate: number
  gapMs: number
  /** Every answer the load got, each POST attempt included. */
  answers: Answer[]
  load: LoadResult
  live: LiveResult
  /** When a was killed (performance.now(), as Answer.at). */
  killedAt: number
  /** When `pg_ctl promote` was run (performance.now(), as Answer.at). */
  promotedAt: number
  /** From `pg_ctl promote` until it returned (b accepts writes). */
  promoteMs: number
  /** From `pg_ctl promote` to the first 201 that arrived after it; undefined if none did. */
  firstWriteMs: number | undefined
  /** Rows on b at the kill (replayed) and at the end: the bounds of a total answered after the promotion. */
  rowsAtKill: number
  rowsAtEnd: number
  stale: Stale
  verification: Verification
}

const count = (n: number): string => n.toLocaleString('en-US')
const ms = (value: number | undefined): string => value === undefined ? '–' : `${Math.round(value).toLocaleString('en-US')} ms`

/** `503 ×12, ECONNRESET ×1` for the answers that are not `ok`, most frequent first. */
function byStatus (answers: Answer[], ok: (a: Answer) => boolean): string {
  const counts = new Map<string, number>()
  for (const a of answers) {
    if (ok(a)) continue
    counts.set(String(a.status), (counts.get(String(a.status)) ?? 0) + 1)
  }
  if (counts.size === 0) return '0'
  return [...counts].sort((x, y) => y[1] - x[1]).map(([status, n]) => `${status} ×${count(n)}`).join(', ')
}

/**
 * A 500 that is a failure: any write; a read unless it met the gap, answered after the kill and
 * sent before the promotion had completed (Answer.at is when the answer came, ms how long it took).
 */
function isFailing500 (r: FailoverReport, a: FailoverReport['answers'][number]): boolean {
  const sent = a.at - a.ms
  return a.status === 500 && (a.kind === 'post' || a.at < r.killedAt || sent > r.promotedAt + r.promoteMs)
}

export interface Verdict { name: string, result: string, required: string, ok: boolean }

export function verdicts (r: FailoverReport): Verdict[] {
  const { load, live, verification: v } = r
  // Writes are never answered 500 (CONTRACT 14); a read while no database answers is SPEC 7's 500
  // ("Failed to retrieve ..."), and only then.
  const serverErrors = r.answers.filter((a) => isFailing500(r, a))
  // Sent after the kill and answered before the promotion: while there is no primary at all.
  const gapWrites = r.answers.filter((a) => a.phase === 'gap' && a.kind === 'post' && a.at < r.promotedAt)
  const gapNot503 = gapWrites.filter((a) => a.status !== 503)
  const hangs = r.answers.filter((a) => a.ms > HANG_MS)
  const liveClients = live.sse + live.longPolls
  const before = r.answers.filter((a) => a.phase === 'before' && a.kind === 'post' && a.status === 201).length
  return [
    { name: 'Acknowledged writes before the kill (the load wrote)', result: count(before), required: '> 0', ok: before > 0 },
    { name: 'Answers with status 500: write attempts in any phase, reads outside the gap', result: count(serverErrors.length), required: '0', ok: serverErrors.length === 0 },
    { name: 'Write attempts answered in the gap (before the promotion) with another status than 503', result: `${count(gapNot503.length)} of ${count(gapWrites.length)}`, required: '0', ok: gapNot503.length === 0 },
    { name: `Answers slower than ${HANG_MS / 1000} s (hangs)`, result: count(hangs.length), required: '0', ok: hangs.length === 0 },
    { name: 'From promotion to the first acknowledged write', result: ms(r.firstWriteMs), required: `≤ ${FIRST_WRITE_WITHIN_MS / 1000} s`, ok: r.firstWriteMs !== undefined && r.firstWriteMs <= FIRST_WRITE_WITHIN_MS },
    { name: 'Acknowledged writes lost (201, id not on b)', result: `${count(v.ackedMissing)} of ${count(load.acked.size)}`, required: '0', ok: v.ackedMissing === 0 && load.acked.size > 0 },
    { name: 'Acknowledged keys found exactly once on b, with the acknowledged id', result: `${count(v.ackedExactlyOnce)} of ${count(load.acked.size)}`, required: 'all', ok: v.ackedWrong.length === 0 && v.ackedExactlyOnce === load.acked.size },
    { name: 'Keys sent (acknowledged or not) found more than once on b', result: count(v.keysMoreThanOnce), required: '0', ok: v.keysMoreThanOnce === 0 },
    { name: 'Messages on b written during the run without a key the client sent', result: count(v.unknownMessages), required: '0', ok: v.unknownMessages === 0 },
    { name: 'Stale answers after the promotion (an id not on b, a total outside b\'s)', result: `${count(r.stale.count)} of ${count(r.stale.checked)}`, required: '0', ok: r.stale.count === 0 && r.stale.checked > 0 },
    { name: 'Sync clients whose copy equals b\'s `messages` at the end', result: `${count(live.equal)} of ${count(liveClients)}`, required: 'all', ok: live.equal === liveClients && liveClients > 0 }
  ]
}

export function renderReport (r: FailoverReport): string {
  const lines: string[] = []
  lines.push(`Node ${r.node} instances (two), HAProxy ${r.haproxy} with ${r.config}, PostgreSQL ${r.postgres} (a primary, b synchronous standby), ` +
    `${count(r.messages)} messages, ${r.rate} requests/s; a killed (SIGKILL), b promoted ${ms(r.gapMs)} later (pg_ctl promote took ${ms(r.promoteMs)}).`, '')
  lines.push('| Check | Result | Required |', '|---|---:|---:|')
  for (const v of verdicts(r)) lines.push(`| ${v.name} | ${v.result} | ${v.required} ${v.ok ? '✔' : '✘'} |`)
  lines.push('')
  lines.push('Per phase (a request belongs to the phase current when it was sent; each POST attempt is counted, client retries included):', '')
  lines.push('| Phase | Requests | Reads | Failed reads by status | Write attempts | 201 | Failed write attempts by status | Slowest answer |', '|---|---:|---:|---|---:|---:|---|---:|')
  for (const { phase, title } of FAILOVER_PHASES) {
    const answers = r.answers.filter((a) => a.phase === phase)
    const reads = answers.filter((a) => a.kind === 'read')
    const posts = answers.filter((a) => a.kind === 'post')
    const slowest = answers.reduce((m, a) => Math.max(m, a.ms), 0)
    lines.push(`| ${title} | ${count(answers.length)} | ${count(reads.length)} | ${byStatus(reads, (a) => a.status === 200)} | ${count(posts.length)} | ` +
      `${count(posts.filter((a) => a.status === 201).length)} | ${byStatus(posts, (a) => a.status === 201)} | ${ms(answers.length === 0 ? undefined : slowest)} |`)
  }
  lines.push('')
  const posts = r.load.acked.size + r.load.givenUp.length
  lines.push(`POSTs: ${count(posts)} keys sent, ${count(r.load.acked.size)} acknowledged, ${count(r.load.givenUp.length)} given up after 3 client retries ` +
    `(${count(r.verification.givenUpButWritten)} of those written nonetheless, once); ${count(r.load.clientRetries)} client retries; ` +
    `${count(r.load.replayed)} 201s were replays of a stored answer.`)
  lines.push(`Stale check: ${count(r.stale.checked)} reads answered 200 after the promotion; every id they showed must be on b at the end, and every ` +
    `unfiltered total between b's rows at the kill (${count(r.rowsAtKill)}) and at the end (${count(r.rowsAtEnd)}).`)
  const held = r.answers.filter((a) => a.phase === 'gap' && a.kind === 'post' && a.at >= r.promotedAt)
  if (held.length > 0) {
    lines.push(`Write attempts sent in the gap and answered only after the promotion: ${count(held.length)} (${byStatus(held, () => false)}), ` +
      `answered ${ms(Math.min(...held.map((a) => a.at - r.promotedAt)))} to ${ms(Math.max(...held.map((a) => a.at - r.promotedAt)))} after it.`)
  }
  const phases = FAILOVER_PHASES.map(({ phase }) => r.live.phases[phase])
  lines.push(`Sync clients: ${r.live.sse} SSE, ${r.live.longPolls} long-poll (wait=20), ${count(r.live.answers)} answers applied; ` +
    `${count(phases.reduce((n, p) => n + p.sseReconnects, 0))} stream reconnections, ${count(phases.reduce((n, p) => n + p.longPollRetries, 0))} long-polls sent again; ` +
    `deliveries of created messages ${count(phases.reduce((n, p) => n + p.delivered, 0))}, never delivered ${count(phases.reduce((n, p) => n + p.lost, 0))}; ` +
    `${count(r.live.resyncs)} answered 410 and copied again (a position read in the last instants before the kill, past what the standby had received).`)
  const failures = r.answers.filter((a) => isFailing500(r, a) || a.ms > HANG_MS || (a.phase === 'gap' && a.kind === 'post' && a.at < r.promotedAt && a.status !== 503))
  if (failures.length > 0) {
    lines.push('', `Failing answers (first 20 of ${failures.length}):`)
    for (const a of failures.slice(0, 20)) lines.push(`- [${a.phase}] ${a.kind === 'post' ? `POST (Idempotency-Key ${a.path})` : `GET ${a.path}`}: ${String(a.status)} after ${ms(a.ms)} ${JSON.stringify(a.body ?? '').slice(0, 160)}`)
  }
  if (r.stale.examples.length > 0) {
    lines.push('', `Stale answers (first 20 of ${r.stale.count}):`)
    for (const line of r.stale.examples.slice(0, 20)) lines.push(`- ${line}`)
  }
  if (r.verification.ackedWrong.length > 0) {
    lines.push('', 'Acknowledged keys not found exactly once on b (first 20):')
    for (const key of r.verification.ackedWrong.slice(0, 20)) lines.push(`- ${key}`)
  }
  if (r.live.mismatched.length > 0) {
    lines.push('', `Sync clients whose copy differs from b's \`messages\` (first 20 of ${r.live.mismatched.length}):`)
    for (const line of r.live.mismatched.slice(0, 20)) lines.push(`- ${line}`)
  }
  if (r.live.refused.length > 0) {
    lines.push('', `Live requests refused or failed (first 10 of ${r.live.refused.length}; expected around the gap):`)
    for (const f of r.live.refused.slice(0, 10)) lines.push(`- [${f.phase}] ${f.what}: ${f.outcome}`)
  }
  return lines.join('\n')
}
