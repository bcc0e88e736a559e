/**
 * The catch-up row (CONTRACT 13, a stream paced by its client): CATCH_UP_STREAMS SSE streams, each read
 * through a link of its own at CATCH_UP_RATE bytes a second, each catching up about 4 MB of changes from
 * another position, while CATCH_UP_WRITES messages a second are written. It reports what a phone would
 * notice (streams cut off, reconnections, how long catching up took against its size over the link's
 * rate) and what the service held (its peak VmRSS above idle).
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { request } from 'undici'
import { BenchError } from '../run/bench-error.js'
import { ROOT } from '../run/locations.js'
import type { FromCatchUpClient, ToCatchUpClient } from './catch-up-client.js'
import { raisedLimitCommand } from './fleet.js'
import { percentile } from './histogram.js'
import { rssKb } from './proc.js'
import type { CatchUpReport } from './report.js'
import { CATCH_UP_KEY, CATCH_UP_RATE, CATCH_UP_STREAMS, CATCH_UP_WRITES, catchUpName } from './rows.js'
import { catchUp, steadyRssMb, watchCpu, type LiveSession } from './session.js'
import { startLiveWriter } from './writer.js'

/** Changes the streams catch up on: the first stream starts before all of them, the last before the last CATCH_UP_ROWS. */
const CATCH_UP_ROWS = 1000
const CONTENT_CHARACTERS = 4000
const LIMIT = 1000
const RSS_SAMPLE_MS = 100
/** Far beyond the row: every stream's bytes over the link's rate, three times over. */
const DONE_TIMEOUT_MS = 900_000

async function poll (base: string, since: string): Promise<{ next: string, hasMore: boolean, entries: number }> {
  const response = await request(`${base}/v2/messages/changes?since=${since}&limit=1`, { headersTimeout: 30_000, bodyTimeout: 30_000 })
  const body = await response.body.json() as { data: unknown[], next: string, hasMore: boolean }
  if (response.statusCode !== 200) throw new BenchError(`the change feed answered ${response.statusCode}`)
  return { next: body.next, hasMore: body.hasMore, entries: body.data.length }
}

/** Positions one change apart: the n-th stream has all but the first n changes of the row to catch up. */
async function positions (session: LiveSession, count: number): Promise<string[]> {
  const sql = session.sql
  if (sql === undefined) throw new BenchError('the catch-up row writes its changes by SQL (PostgreSQL only)')
  let since = await catchUp(session)
  const content = 'x'.repeat(CONTENT_CHARACTERS)
  // One transaction each, so that every change is a position of its own.
  for (let i = 0; i < count + CATCH_UP_ROWS; i++) {
    await sql`insert into messages (content, author_id) values (${`${content} ${i}`}, ${session.authorIds[i % session.authorIds.length]!})`
  }
  const found = [since]
  while (found.length < count) {
    const answer = await poll(session.service.base, since)
    if (answer.entries === 0) throw new BenchError('the change feed ended before every position was found')
    since = answer.next
    found.push(since)
  }
  return found
}

export async function runCatchUp (session: LiveSession): Promise<CatchUpReport> {
  const { service } = session
  const problems: string[] = []
  process.stdout.write(`bench: live catch-up: writing ${CATCH_UP_STREAMS + CATCH_UP_ROWS} changes of ${CONTENT_CHARACTERS} characters, one transaction each\n`)
  const starts = await positions(session, CATCH_UP_STREAMS)
  const idleMb = await steadyRssMb(service.process.pid, 7, 300)

  const { command, args } = raisedLimitCommand([join(ROOT, 'dist', 'bench', 'live', 'catch-up-client.js')])
  const child = spawn(command, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  let peakKb = 0
  const sampler = setInterval(() => { peakKb = Math.max(peakKb, rssKb(service.process.pid)) }, RSS_SAMPLE_MS)
  const writer = startLiveWriter({
    base: service.base,
    tokens: session.apiTokens,
    bodies: session.bodies,
    sql: session.sql,
    authorIds: session.authorIds,
    rate: CATCH_UP_WRITES,
    onCommit: () => {}
  })
  const began = performance.now()
  const cpu = watchCpu(session, { pid: child.pid! })
  try {
    const done = new Promise<Extract<FromCatchUpClient, { kind: 'done' }>>((resolve, reject) => {
      child.on('message', (message: FromCatchUpClient) => { if (message.kind === 'done') resolve(message) })
      child.on('exit', (code) => { reject(new BenchError(`the catch-up client exited (${String(code)})`)) })
    })
    const start: ToCatchUpClient = { kind: 'start', base: service.base, positions: starts, limit: LIMIT, bytesPerSecond: CATCH_UP_RATE }
    child.send(start)
    const timeout = setTimeout(() => { child.send({ kind: 'stop' } satisfies ToCatchUpClient) }, DONE_TIMEOUT_MS)
    const result = await done.finally(() => { clearTimeout(timeout) })
    const seconds = (performance.now() - began) / 1000
    const used = cpu.stop()
    const writes = await writer.stop()
    problems.push(...result.errors.map((e) => `client: ${e}`), ...writes.problems)
    const streams = result.streams
    const caughtUp = streams.filter((s) => s.ms !== undefined)
    const cutOffs = streams.reduce((n, s) => n + s.cutOffs, 0)
    const reconnects = streams.reduce((n, s) => n + s.reconnects, 0)
    if (caughtUp.length < streams.length) problems.push(`${streams.length - caughtUp.length} of ${streams.length} streams never caught up`)
    if (cutOffs > 0) problems.push(`${cutOffs} cut-offs`)
    // How long each took, against its bytes over the link's rate: 1 is the link's own pace.
    const ratios = caughtUp.map((s) => (s.ms! / 1000) / (s.bytes / CATCH_UP_RATE)).sort((a, b) => a - b)
    const times = caughtUp.map((s) => s.ms! / 1000).sort((a, b) => a - b)
    const sizes = streams.map((s) => s.bytes / 1e6).sort((a, b) => a - b)
    const firsts = streams.flatMap((s) => s.firstByteMs === undefined ? [] : [s.firstByteMs / 1000]).sort((a, b) => a - b)
    const peakMb = peakKb / 1024
    const report: CatchUpReport = {
      key: CATCH_UP_KEY,
      name: catchUpName(),
      streams: streams.length,
      bytesPerSecond: CATCH_UP_RATE,
      seconds,
      mbPerStream: { min: sizes[0] ?? 0, median: percentile(sizes, 0.5), max: sizes.at(-1) ?? 0 },
      totalMb: sizes.reduce((a, b) => a + b, 0),
      caughtUp: caughtUp.length,
      cutOffs,
      reconnects,
      catchUpSeconds: { p50: percentile(times, 0.5), p99: percentile(times, 0.99), max: times.at(-1) ?? 0 },
      againstLink: { p50: percentile(ratios, 0.5), p99: percentile(ratios, 0.99), max: ratios.at(-1) ?? 0 },
      writes: { made: writes.writes.length, achievedRate: writes.writes.length / Math.max(1, writes.seconds), failed: writes.failed },
      rss: { idleMb, peakMb, aboveIdleMb: peakMb - idleMb },
      firstByteSeconds: { p50: percentile(firsts, 0.5), max: firsts.at(-1) ?? 0 },
      cpu: used,
      problems
    }
    process.stdout.write(`bench: live catch-up: ${caughtUp.length}/${streams.length} caught up in ${seconds.toFixed(1)} s, ${cutOffs} cut-offs, ${reconnects} reconnections, ` +
      `time ÷ (size ÷ rate) p50 ${report.againstLink.p50.toFixed(2)} p99 ${report.againstLink.p99.toFixed(2)}, peak RSS ${peakMb.toFixed(0)} MB (${report.rss.aboveIdleMb.toFixed(0)} above idle)\n`)
    return report
  } finally {
    clearInterval(sampler)
    await writer.stop().catch(() => undefined)
    if (child.exitCode === null) child.kill('SIGKILL')
  }
}
