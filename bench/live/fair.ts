/**
 * The fairness row (CONTRACT 16, "Live delivery is shared fairly"): FAIR_SLOW_STREAMS SSE streams from
 * one address (the catch-up load client, catch-up-client.ts, on 127.0.0.1), each starting the initial
 * copy at limit=1000 and read at FAIR_SLOW_RATE bytes a second: slow, but reading. Once they hold what
 * the service lets them, FAIR_STREAMS streams of other clients open, each from a loopback address of its
 * own (fair-streams.ts), at a position from before the row's first write, while FAIR_WRITES messages a
 * second are written. Reported: the other clients' time to headers and to first event, each write's
 * delay to them once open, whether each ends holding every write, what the slow address held meanwhile,
 * and the most the service held unsent.
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { LIVE_UNSENT_BYTES } from '../../src/memory/budget.js'
import { BenchError } from '../run/bench-error.js'
import { ROOT } from '../run/locations.js'
import { metricsText, sums } from '../servers/service-metrics.js'
import type { FromCatchUpClient, ToCatchUpClient } from './catch-up-client.js'
import { openFairStream, type FairStream } from './fair-streams.js'
import { raisedLimitCommand } from './fleet.js'
import { DelayHistogram, percentile } from './histogram.js'
import type { FairReport } from './report.js'
import { FAIR_KEY, FAIR_SLOW_RATE, FAIR_SLOW_STREAMS, FAIR_STREAMS, FAIR_WRITES, fairName } from './rows.js'
import { catchUp, type LiveSession } from './session.js'
import { startLiveWriter } from './writer.js'

const SLOW_LIMIT = 1000
/** How long the slow streams may take to hold what they may; past it the row goes on, and says so. */
const SATURATE_TIMEOUT_MS = 60_000
/** How long the other streams may take, after the last write, to hold every write. */
const DRAIN_MS = 30_000
const SAMPLE_MS = 250
const MB = 1024 * 1024
const NAMES = ['live_unsent_bytes', 'live_streams_waiting', 'live_streams_paced', 'live_streams_open'] as const

interface Held { unsentBytes: number, waiting: number, paced: number, open: number }

async function held (base: string): Promise<Held> {
  const found = sums(await metricsText(base), NAMES)
  return {
    unsentBytes: found.get('live_unsent_bytes') ?? 0,
    waiting: found.get('live_streams_waiting') ?? 0,
    paced: found.get('live_streams_paced') ?? 0,
    open: found.get('live_streams_open') ?? 0
  }
}

/**
 * Until the slow streams are all open and hold what they may: some wait for room (live_streams_waiting,
 * where the service has it), or together they hold LIVE_UNSENT_BYTES (where it has not: every stream
 * then waits for the one pile).
 */
async function saturation (base: string): Promise<{ state: Held, seconds: number | undefined }> {
  const began = performance.now()
  for (;;) {
    const state = await held(base)
    const seconds = (performance.now() - began) / 1000
    if (state.open >= FAIR_SLOW_STREAMS && (state.waiting > 0 || state.unsentBytes >= LIVE_UNSENT_BYTES)) return { state, seconds }
    if (performance.now() - began > SATURATE_TIMEOUT_MS) return { state, seconds: undefined }
    await sleep(SAMPLE_MS)
  }
}

/** The most live_unsent_bytes showed, read every SAMPLE_MS until stop(). */
function watchUnsent (base: string): { stop: () => Promise<number> } {
  let highest = 0
  const state = { stopped: false }
  const sampling = (async () => {
    while (!state.stopped) {
      highest = Math.max(highest, (await held(base).catch(() => undefined))?.unsentBytes ?? 0)
      await sleep(SAMPLE_MS)
    }
  })()
  return {
    stop: async () => {
      state.stopped = true
      await sampling
      return highest
    }
  }
}

const ms = (values: number[]): { p50: number, max: number } => {
  const sorted = [...values].sort((a, b) => a - b)
  return { p50: percentile(sorted, 0.5), max: sorted.at(-1) ?? 0 }
}

export async function runFair (session: LiveSession): Promise<FairReport> {
  const { service } = session
  const problems: string[] = []
  // Before the first write: the other streams' first answer has changes to say, read when they open.
  const since = await catchUp(session)
  const unsent = watchUnsent(service.base)
  const writer = startLiveWriter({ base: service.base, tokens: session.apiTokens, bodies: session.bodies, sql: session.sql, authorIds: session.authorIds, rate: FAIR_WRITES, onCommit: () => {} })
  const { command, args } = raisedLimitCommand([join(ROOT, 'dist', 'bench', 'live', 'catch-up-client.js')])
  const child = spawn(command, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const others: FairStream[] = []
  try {
    const done = new Promise<Extract<FromCatchUpClient, { kind: 'done' }>>((resolve, reject) => {
      child.on('message', (message: FromCatchUpClient) => { if (message.kind === 'done') resolve(message) })
      child.on('exit', (code) => { reject(new BenchError(`the slow streams' client exited (${String(code)})`)) })
    })
    done.catch(() => {})
    const start: ToCatchUpClient = { kind: 'start', base: service.base, positions: Array.from({ length: FAIR_SLOW_STREAMS }, () => null), limit: SLOW_LIMIT, bytesPerSecond: FAIR_SLOW_RATE }
    child.send(start)
    const full = await saturation(service.base)
    if (full.seconds === undefined) problems.push(`the slow streams did not hold what they may within ${SATURATE_TIMEOUT_MS / 1000} s (${(full.state.unsentBytes / MB).toFixed(1)} MB unsent, ${full.state.open} open)`)
    process.stdout.write(`bench: live fairness: ${full.state.open} slow streams open, ${(full.state.unsentBytes / MB).toFixed(1)} MB unsent, ${full.state.waiting} waiting for room, ${full.state.paced} paced; opening ${FAIR_STREAMS} streams from other addresses\n`)

    for (let i = 0; i < FAIR_STREAMS; i++) others.push(openFairStream(service.base, since, `127.0.0.${2 + i}`))
    await sleep(session.seconds * 1000)
    const written = await writer.stop()
    const holdsAll = (stream: FairStream): boolean => written.writes.every((w) => stream.received.has(w.id))
    const drainUntil = performance.now() + DRAIN_MS
    while (!others.every(holdsAll) && performance.now() < drainUntil) await sleep(SAMPLE_MS)
    // Judged while the slow streams are still open: once they close, anything would reach the others.
    const complete = others.filter(holdsAll).length
    const during = await held(service.base)

    child.send({ kind: 'stop' } satisfies ToCatchUpClient)
    const slow = await done
    const peak = await unsent.stop()

    const delay = new DelayHistogram()
    for (const stream of others) {
      const openAt = stream.headersAt
      if (openAt === undefined) continue
      for (const write of written.writes) {
        const at = stream.received.get(write.id)
        if (write.commit >= openAt && at !== undefined) delay.record(at - write.commit)
      }
    }
    const headed = others.filter((s) => s.headersAt !== undefined && s.status === 200)
    const evented = others.filter((s) => s.firstEventAt !== undefined)
    const cutOffs = slow.streams.reduce((n, s) => n + s.cutOffs, 0)
    if (headed.length < others.length) problems.push(`${others.length - headed.length} of ${others.length} other streams got no 200 headers${others.find((s) => s.error !== undefined)?.error === undefined ? '' : ` (${others.find((s) => s.error !== undefined)!.error!})`}`)
    if (evented.length < others.length) problems.push(`${others.length - evented.length} of ${others.length} other streams got no event`)
    if (complete < others.length) problems.push(`${others.length - complete} of ${others.length} other streams lack writes ${DRAIN_MS / 1000} s after the last`)
    if (cutOffs > 0) problems.push(`${cutOffs} slow streams were cut off`)
    if (peak > LIVE_UNSENT_BYTES) problems.push(`live_unsent_bytes reached ${(peak / MB).toFixed(1)} MB, past LIVE_UNSENT_BYTES`)
    problems.push(...slow.errors.map((e) => `slow streams: ${e}`), ...written.problems.map((p) => `writer: ${p}`))

    const report: FairReport = {
      key: FAIR_KEY,
      name: fairName(),
      slow: {
        streams: FAIR_SLOW_STREAMS,
        saturatedSeconds: full.seconds,
        unsentMb: full.state.unsentBytes / MB,
        waiting: full.state.waiting,
        paced: full.state.paced,
        openAtEnd: during.open - others.filter((s) => !s.ended).length,
        kbRead: slow.streams.reduce((n, s) => n + s.bytes, 0) / 1024,
        cutOffs
      },
      others: {
        streams: others.length,
        headers: headed.length,
        headersMs: ms(headed.map((s) => s.headersAt! - s.requestedAt)),
        firstEvents: evented.length,
        firstEventMs: ms(evented.map((s) => s.firstEventAt! - s.requestedAt)),
        delay: delay.stats(),
        complete
      },
      writes: { made: written.writes.length, achievedRate: written.writes.length / Math.max(1, written.seconds), failed: written.failed },
      unsentPeakMb: peak / MB,
      unsentBoundMb: LIVE_UNSENT_BYTES / MB,
      problems
    }
    const o = report.others
    process.stdout.write(`bench: live fairness: other streams: headers ${o.headers}/${o.streams} (p50 ${o.headersMs.p50.toFixed(0)} max ${o.headersMs.max.toFixed(0)} ms), ` +
      `first event ${o.firstEvents}/${o.streams} (p50 ${o.firstEventMs.p50.toFixed(0)} max ${o.firstEventMs.max.toFixed(0)} ms), delay p99 ${o.delay.p99.toFixed(1)} ms, ${o.complete}/${o.streams} hold every write; ` +
      `unsent at most ${report.unsentPeakMb.toFixed(1)} MB${problems.length > 0 ? ` FAILED: ${problems[0]!}` : ''}\n`)
    return report
  } finally {
    for (const stream of others) stream.close()
    await writer.stop().catch(() => undefined)
    await unsent.stop()
    if (child.exitCode === null) child.kill('SIGKILL')
  }
}
