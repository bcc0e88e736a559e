import type { Retries } from '../deploy-checks/haproxy.js'
import type { LiveResult } from '../deploy-checks/live-clients.js'
import type { LoadResult, Phase, Sample } from '../deploy-checks/load.js'
import type { Verification } from '../deploy-checks/verify.js'

export interface Restart {
  instance: string
  how: 'SIGTERM' | 'SIGKILL'
  /** How the stopped process exited. */
  exit: string
  /** From the signal until the old process had exited. */
  stoppedMs: number
  /** From the signal until HAProxy marked the new process up. */
  backMs: number
}

export interface Report {
  node: string
  haproxy: string
  config: string
  messages: number
  rate: number
  load: LoadResult
  live: LiveResult
  restarts: Restart[]
  retries: Retries
  verification: Verification
}

const PHASES: Array<{ phase: Phase, title: string }> = [
  { phase: 'rest', title: 'At rest' },
  { phase: 'rolling', title: 'Rolling restart (SIGTERM, one at a time)' },
  { phase: 'crash', title: 'Crash (SIGKILL) and restart' }
]

function percentile (values: number[], p: number): number | undefined {
  if (values.length === 0) return undefined
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]
}

const durations = (samples: Sample[]): number[] => samples.map((s) => s.ms)

const ms = (value: number | undefined): string => value === undefined ? '–' : `${value.toFixed(1)} ms`
const count = (n: number): string => n.toLocaleString('en-US')

export interface Verdict { name: string, result: string, required: string, ok: boolean }

/** What the check must show (the process exits 1 unless every line holds). */
export function verdicts (report: Report): Verdict[] {
  const { load, live, verification: v } = report
  const phases = Object.values(live.phases)
  const delivered = phases.reduce((n, p) => n + p.delivered, 0)
  const lost = phases.reduce((n, p) => n + p.lost, 0)
  const liveClients = live.sse + live.longPolls
  const posts = load.acked.size + load.givenUp.length
  const terminated = report.restarts.filter((r) => r.how === 'SIGTERM')
  return [
    { name: 'Failed reads seen by the client', result: `${count(load.failedReads.length)} of ${count(load.reads)}`, required: '0', ok: load.failedReads.length === 0 && load.reads > 0 },
    { name: 'POSTs the client gave up on (3 retries, same key)', result: `${count(load.givenUp.length)} of ${count(posts)}`, required: '0', ok: load.givenUp.length === 0 && posts > 0 },
    { name: 'Acknowledged keys found exactly once in `messages`, with the acknowledged id', result: `${count(v.ackedExactlyOnce)} of ${count(load.acked.size)}`, required: 'all', ok: v.ackedWrong.length === 0 && v.ackedExactlyOnce === load.acked.size },
    { name: 'Messages written during the run without a key the client sent', result: count(v.unknownMessages), required: '0', ok: v.unknownMessages === 0 },
    { name: 'Instances stopped by SIGTERM that exited 0', result: `${terminated.filter((r) => r.exit === 'exit 0').length} of ${terminated.length}`, required: 'all', ok: terminated.length > 0 && terminated.every((r) => r.exit === 'exit 0') },
    { name: 'Created messages a live client never received (clients × messages)', result: `${count(lost)} of ${count(delivered + lost)}`, required: '0', ok: lost === 0 && delivered > 0 },
    { name: 'Live clients whose copy equals `messages` at the end', result: `${count(live.equal)} of ${count(liveClients)}`, required: 'all', ok: live.equal === liveClients && liveClients > 0 }
  ]
}

export function renderReport (report: Report): string {
  const { load, live } = report
  const lines: string[] = []
  lines.push(`Node ${report.node} instances, HAProxy ${report.haproxy} with ${report.config}, ${count(report.messages)} messages, ${report.rate} requests/s`, '')
  lines.push('| Check | Result | Required |', '|---|---:|---:|')
  for (const v of verdicts(report)) lines.push(`| ${v.name} | ${v.result} | ${v.required} ${v.ok ? '✔' : '✘'} |`)
  lines.push('')
  lines.push('| Phase | Reads | POSTs acknowledged | Read p99 | POST p99 (with client retries) |', '|---|---:|---:|---:|---:|')
  for (const { phase, title } of PHASES) {
    const reads = durations(load.samples.filter((s) => s.phase === phase && s.kind === 'read'))
    const posts = durations(load.samples.filter((s) => s.phase === phase && s.kind === 'post'))
    lines.push(`| ${title} | ${count(reads.length)} | ${count(posts.length)} | ${ms(percentile(reads, 0.99))} | ${ms(percentile(posts, 0.99))} |`)
  }
  lines.push('')
  lines.push(`Live clients: ${live.sse} SSE, ${live.longPolls} long-poll (wait=20), ${count(live.answers)} answers applied. ` +
    'Delay: from the writer\'s 201 to the receipt, for each client once it holds its copy.', '')
  lines.push('| Phase | Deliveries | Lost | SSE reconnects | Long-polls sent again | SSE delay p99 / max | Long-poll delay p99 / max |', '|---|---:|---:|---:|---:|---:|---:|')
  for (const { phase, title } of PHASES) {
    const p = live.phases[phase]
    const delays = (values: number[]): string => values.length === 0 ? '–' : `${ms(percentile(values, 0.99))} / ${ms(percentile(values, 1))}`
    lines.push(`| ${title} | ${count(p.delivered)} | ${count(p.lost)} | ${count(p.sseReconnects)} | ${count(p.longPollRetries)} | ${delays(p.sseDelays)} | ${delays(p.longPollDelays)} |`)
  }
  lines.push('')
  lines.push(`Retries: HAProxy sent ${count(report.retries.retried)} requests again (${count(report.retries.redispatched)} to another instance); ` +
    `the client retried ${count(load.clientRetries)} POSTs; ${count(load.replayed)} 201s were replays of a stored answer.`)
  if (report.verification.givenUpButWritten > 0) lines.push(`${report.verification.givenUpButWritten} keys the client gave up on were written nonetheless.`)
  lines.push('')
  lines.push('| Instance | Stopped with | Old process | Exited after | Marked up after |', '|---|---|---|---:|---:|')
  for (const r of report.restarts) lines.push(`| ${r.instance} | ${r.how} | ${r.exit} | ${ms(r.stoppedMs)} | ${ms(r.backMs)} |`)
  const failures = [...load.failedReads, ...load.givenUp]
  if (failures.length > 0) {
    lines.push('', `Failures (first 20 of ${failures.length}):`)
    for (const f of failures.slice(0, 20)) lines.push(`- [${f.phase}] ${f.what}: ${f.outcome}`)
  }
  if (live.lostExamples.length > 0) {
    lines.push('', 'Lost by live clients (client: id, first 20):')
    for (const line of live.lostExamples) lines.push(`- ${line}`)
  }
  if (live.mismatched.length > 0) {
    lines.push('', `Live clients whose copy differs from \`messages\` (first 20 of ${live.mismatched.length}):`)
    for (const line of live.mismatched.slice(0, 20)) lines.push(`- ${line}`)
  }
  if (live.refused.length > 0) {
    lines.push('', `Live requests refused or failed (first 20 of ${live.refused.length}):`)
    for (const f of live.refused.slice(0, 20)) lines.push(`- [${f.phase}] ${f.what}: ${f.outcome}`)
  }
  if (report.verification.ackedWrong.length > 0) {
    lines.push('', 'Acknowledged keys not found exactly once (first 20):')
    for (const key of report.verification.ackedWrong.slice(0, 20)) lines.push(`- ${key}`)
  }
  return lines.join('\n')
}
