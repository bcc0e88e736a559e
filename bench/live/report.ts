/** The live delivery section of the results (CONTRACT 9, 13): what it holds, and its Markdown. Pure functions, no I/O. */
import type { DelayStats } from './histogram.js'
import type { ExactnessReport, LiveMode } from './protocol.js'

export interface DeliveryReport {
  key: string
  name: string
  mode: LiveMode
  connections: number
  /** Writes per second asked for, and made (API and SQL), over `seconds`. */
  rate: number
  seconds: number
  writes: { api: number, sql: number, failed: number, achievedRate: number }
  /** Non-empty answers received (events × clients) and change entries, each a second, from the first write to the last receipt. */
  deliveriesPerSecond: number
  entriesPerSecond: number
  delay: DelayStats
  rss: { beforeMb: number, openMb: number, perConnectionKb: number, peakMb: number }
  /**
   * Watcher head reads and answer reads a second while the row wrote (the service's own counters); and
   * every transaction of the database a second (PostgreSQL's statistics: the writes, and each long-poll's own first read, included).
   */
  watch: { queriesPerSecond: number, answerReadsPerSecond: number, transactionsPerSecond?: number }
  /** CPU seconds a second while the row wrote: the service, the load client, PostgreSQL for this database (when on this machine). */
  cpu: { service: number, client: number, postgres?: number }
  /** The machine's 1-minute load average as the writes ended: above its CPUs, other work shared the machine. */
  load: number
  exact: ExactnessReport
  /** The table after the row: written ids not in it, rows in it nobody wrote (PostgreSQL only). */
  table?: { missing: number, extra: number }
  reconnects: number
  problems: string[]
}

export interface SaturationStep { rate: number, achievedRate: number, deliveriesPerSecond: number, p50: number, p99: number, max: number, load: number }

export interface SaturationReport {
  key: string
  name: string
  mode: LiveMode
  connections: number
  stepSeconds: number
  steps: SaturationStep[]
  /** The first step whose p99 passed the limit, if any did. */
  passedAt?: SaturationStep
  limitMs: number
  /** Why the steps ended before the limit, when they did. */
  note?: string
  exact?: ExactnessReport
  problems: string[]
}

export interface IdleMemory { mode: LiveMode, connections: number, open: number, beforeMb: number, openMb: number, afterCloseMb: number, perConnectionKb: number }

export interface MemoryReport { key: string, name: string, idle: IdleMemory[], problems: string[] }

export interface PostRound { live: 'on' | 'off', rps: number, p99: number, created: number, postgresCpuMsPerMessage?: number, load: number }

export interface WritePathReport {
  key: string
  name: string
  seconds: number
  connections: number
  rounds: PostRound[]
  /** POST with SSE clients open on the live-on service. */
  withClients?: { clients: number, rps: number, p99: number, created: number, deliveriesPerSecond: number, delay: DelayStats, exact: ExactnessReport, postgresCpuMsPerMessage?: number }
  problems: string[]
}

export interface CatchUpReport {
  key: string
  name: string
  streams: number
  bytesPerSecond: number
  /** From the first request to the last stream caught up (or the client giving up). */
  seconds: number
  /** What each stream read, MB. */
  mbPerStream: { min: number, median: number, max: number }
  totalMb: number
  caughtUp: number
  /** Streams ended by the service, or failed, before they caught up; and the requests that followed. */
  cutOffs: number
  reconnects: number
  /** Seconds from the request to the answer that said hasMore false, and that time over (bytes read ÷ the link's rate). */
  catchUpSeconds: { p50: number, p99: number, max: number }
  againstLink: { p50: number, p99: number, max: number }
  writes: { made: number, achievedRate: number, failed: number }
  rss: { idleMb: number, peakMb: number, aboveIdleMb: number }
  /** Seconds from a stream's request to its first byte. */
  firstByteSeconds: { p50: number, max: number }
  /** CPU seconds a second over the row: the service, the load client, PostgreSQL for this database. */
  cpu: { service: number, client: number, postgres?: number }
  problems: string[]
}

export interface FairReport {
  key: string
  name: string
  /** The slow address's streams: how long they took to hold what they may (undefined: they never did), and what they held then. */
  slow: { streams: number, saturatedSeconds: number | undefined, unsentMb: number, waiting: number, paced: number, openAtEnd: number, kbRead: number, cutOffs: number }
  /**
   * The other clients' streams: how many got 200 headers and an event, milliseconds from the request to
   * each, the delay of each write committed once they were open (commit returned to the writer to
   * receipt), and how many held every write while the slow streams were still open.
   */
  others: { streams: number, headers: number, headersMs: { p50: number, max: number }, firstEvents: number, firstEventMs: { p50: number, max: number }, delay: DelayStats, complete: number }
  writes: { made: number, achievedRate: number, failed: number }
  /** The most live_unsent_bytes showed over the row, and LIVE_UNSENT_BYTES. */
  unsentPeakMb: number
  unsentBoundMb: number
  problems: string[]
}

export interface LiveTarget { what: string, value: string, target: string, met?: boolean }

export interface LiveReport {
  /** The database the service used, and the change feed's size when the section began. */
  database: string
  messages: number
  durationSeconds: number
  rows: DeliveryReport[]
  catchUp?: CatchUpReport
  fair?: FairReport
  saturation: SaturationReport[]
  memory?: MemoryReport
  writePath?: WritePathReport
  targets: LiveTarget[]
  problems: string[]
}

const int = (n: number): string => Math.round(n).toLocaleString('en-US')
const ms = (n: number): string => n.toFixed(n < 10 ? 2 : 1)
const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length)

function exactCell (exact: ExactnessReport | undefined, connections: number): string {
  if (exact === undefined) return '—'
  const parts = [`${int(exact.complete)}/${int(connections)} complete`]
  if (exact.missing > 0) parts.push(`${int(exact.missing)} missing`)
  if (exact.outOfOrder > 0) parts.push(`${exact.outOfOrder} out of order`)
  if (exact.unexpected > 0) parts.push(`${exact.unexpected} unexpected`)
  parts.push(`${exact.orders} order${exact.orders === 1 ? '' : 's'}, ${exact.positions} end position${exact.positions === 1 ? '' : 's'}`)
  return parts.join(', ')
}

/** Every problem of the section, each with its row. */
export function liveProblems (live: LiveReport): string[] {
  return [
    ...live.problems,
    ...live.rows.flatMap((r) => r.problems.map((p) => `${r.name}: ${p}`)),
    ...(live.catchUp?.problems ?? []).map((p) => `${live.catchUp!.name}: ${p}`),
    ...(live.fair?.problems ?? []).map((p) => `${live.fair!.name}: ${p}`),
    ...live.saturation.flatMap((r) => r.problems.map((p) => `${r.name}: ${p}`)),
    ...(live.memory?.problems ?? []).map((p) => `${live.memory!.name}: ${p}`),
    ...(live.writePath?.problems ?? []).map((p) => `${live.writePath!.name}: ${p}`)
  ]
}

/** The rounds of one setting of the write path, averaged. */
export function roundsOf (report: WritePathReport, live: 'on' | 'off'): { rps: number, p99: number, cpu?: number } {
  const rounds = report.rounds.filter((r) => r.live === live)
  const cpus = rounds.flatMap((r) => r.postgresCpuMsPerMessage === undefined ? [] : [r.postgresCpuMsPerMessage])
  return { rps: mean(rounds.map((r) => r.rps)), p99: mean(rounds.map((r) => r.p99)), cpu: cpus.length === 0 ? undefined : mean(cpus) }
}

export function liveLines (live: LiveReport): string[] {
  const lines = [`## Live delivery (${live.database}, ${int(live.messages)} messages)`, '',
    'A load client of its own process holds the connections on loopback; the writes alternate POST /v2/messages (real tokens) and an INSERT by another ' +
    'connection (on PostgreSQL). Delay: from the write\'s commit returning to the writer (201 received, INSERT returned) to the client\'s receipt; ' +
    'a receipt before that counts as 0 ms ("early"). Deliveries: non-empty answers received, summed over the clients. ' +
    'RSS per connection: the service\'s VmRSS with the clients open less before, over the clients; below 10,000 clients the difference is within ' +
    'the heap\'s own swings (tens of MB), so the memory row is the figure to read. CPU: seconds a second while the row wrote.', '']
  if (live.rows.length > 0) {
    lines.push('| Row | Clients | Writes/s asked / made (API + SQL) | Deliveries/s | Entries/s | Delay p50 / p99 / max ms (early) | RSS per connection KB (open − before) | ' +
      'Watch queries/s | Answer reads/s | DB transactions/s | CPU s/s service / client / PostgreSQL | Service CPU µs per delivery | Load average | Clients exact | Status |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|')
    for (const r of live.rows) {
      lines.push(`| ${r.name} | ${int(r.connections)} | ${int(r.rate)} / ${r.writes.achievedRate.toFixed(1)} (${int(r.writes.api)} + ${int(r.writes.sql)}) | ` +
        `${int(r.deliveriesPerSecond)} | ${int(r.entriesPerSecond)} | ${ms(r.delay.p50)} / ${ms(r.delay.p99)} / ${ms(r.delay.max)} (${int(r.delay.early)}) | ` +
        `${r.rss.perConnectionKb.toFixed(1)} (${r.rss.openMb.toFixed(0)} − ${r.rss.beforeMb.toFixed(0)} MB) | ${r.watch.queriesPerSecond.toFixed(1)} | ${r.watch.answerReadsPerSecond.toFixed(1)} | ` +
        `${r.watch.transactionsPerSecond === undefined ? '—' : int(r.watch.transactionsPerSecond)} | ` +
        `${r.cpu.service.toFixed(2)} / ${r.cpu.client.toFixed(2)} / ${r.cpu.postgres === undefined ? '—' : r.cpu.postgres.toFixed(2)} | ` +
        `${r.deliveriesPerSecond > 0 ? int(r.cpu.service / r.deliveriesPerSecond * 1e6) : '—'} | ${r.load.toFixed(1)} | ` +
        `${exactCell(r.exact, r.connections)} | ${r.problems.length > 0 ? 'FAILED' : 'ok'} |`)
    }
  }
  const c = live.catchUp
  if (c !== undefined) {
    lines.push('', `${c.name}: each stream starts at another position of the change feed and reads every answer (limit=1000, about 1 MiB each) ` +
      'through a link that passes on what the service sends at that rate; the load client counts bytes and reads only the id lines and the end of each answer. ' +
      'Catching up: from the request to the first answer that says hasMore false, also as a ratio to the stream\'s bytes over the link\'s rate (1 is the link\'s own pace).', '',
    '| Streams caught up | MB per stream (min / median / max) | Cut-offs | Reconnections | First byte p50 / max s | Catching up p50 / p99 / max s | ÷ (size ÷ rate) p50 / p99 / max | Writes/s made | Service RSS idle / peak MB (above idle) | CPU s/s service / client / PostgreSQL | Seconds | Status |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    `| ${int(c.caughtUp)}/${int(c.streams)} | ${c.mbPerStream.min.toFixed(1)} / ${c.mbPerStream.median.toFixed(1)} / ${c.mbPerStream.max.toFixed(1)} | ${int(c.cutOffs)} | ${int(c.reconnects)} | ` +
      `${c.firstByteSeconds.p50.toFixed(1)} / ${c.firstByteSeconds.max.toFixed(1)} | ` +
      `${c.catchUpSeconds.p50.toFixed(1)} / ${c.catchUpSeconds.p99.toFixed(1)} / ${c.catchUpSeconds.max.toFixed(1)} | ${c.againstLink.p50.toFixed(2)} / ${c.againstLink.p99.toFixed(2)} / ${c.againstLink.max.toFixed(2)} | ` +
      `${c.writes.achievedRate.toFixed(1)} | ${c.rss.idleMb.toFixed(0)} / ${c.rss.peakMb.toFixed(0)} (${c.rss.aboveIdleMb.toFixed(0)}) | ` +
      `${c.cpu.service.toFixed(2)} / ${c.cpu.client.toFixed(2)} / ${c.cpu.postgres === undefined ? '—' : c.cpu.postgres.toFixed(2)} | ${c.seconds.toFixed(1)} | ${c.problems.length > 0 ? 'FAILED' : 'ok'} |`)
  }
  const f = live.fair
  if (f !== undefined) {
    lines.push('', `${f.name}: the slow streams start the initial copy at limit=1000, each read by a socket whose reads are paused and drained at that rate; ` +
      'once they hold what the service lets them (some wait for room, or they hold all of LIVE_UNSENT_BYTES), the other streams open, each from a loopback address ' +
      'of its own, at a position from before the row\'s first write. Headers and first event: from the request. Delay: writes committed once the stream was open, ' +
      'from the commit returning to the writer to the receipt.', '',
    '| Slow streams: held when the others opened MB (waiting / paced) | Slow: cut-offs, KB read in all | Others: headers p50 / max ms | Others: first event p50 / max ms | ' +
      'Others: delay p50 / p99 / max ms | Others holding every write | Writes/s made | Unsent at most MB (bound) | Status |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    `| ${f.slow.unsentMb.toFixed(1)} (${int(f.slow.waiting)} / ${int(f.slow.paced)})${f.slow.saturatedSeconds === undefined ? ', never full' : ''} | ${int(f.slow.cutOffs)}, ${int(f.slow.kbRead)} | ` +
      `${f.others.headers}/${f.others.streams}: ${int(f.others.headersMs.p50)} / ${int(f.others.headersMs.max)} | ${f.others.firstEvents}/${f.others.streams}: ${int(f.others.firstEventMs.p50)} / ${int(f.others.firstEventMs.max)} | ` +
      `${ms(f.others.delay.p50)} / ${ms(f.others.delay.p99)} / ${ms(f.others.delay.max)} | ${f.others.complete}/${f.others.streams} | ${f.writes.achievedRate.toFixed(1)} | ` +
      `${f.unsentPeakMb.toFixed(1)} (${f.unsentBoundMb.toFixed(0)}) | ${f.problems.length > 0 ? 'FAILED' : 'ok'} |`)
  }
  for (const s of live.saturation) {
    lines.push('', `${s.name}: the write rate doubled every ${s.stepSeconds} s until the p99 delay passed ${s.limitMs} ms` +
      (s.passedAt === undefined ? ' (it never did)' : `, at ${int(s.passedAt.rate)} writes/s asked: ${int(s.passedAt.deliveriesPerSecond)} deliveries/s there`) +
      `. Clients exact: ${exactCell(s.exact, s.connections)}.${s.note === undefined ? '' : ` Note: ${s.note}.`}`, '',
    '| Writes/s asked | Writes/s made | Deliveries/s | Delay p50 ms | p99 ms | max ms | Load average |', '|---:|---:|---:|---:|---:|---:|---:|')
    for (const step of s.steps) lines.push(`| ${int(step.rate)} | ${step.achievedRate.toFixed(1)} | ${int(step.deliveriesPerSecond)} | ${ms(step.p50)} | ${ms(step.p99)} | ${ms(step.max)} | ${step.load.toFixed(1)} |`)
  }
  if (live.memory !== undefined) {
    lines.push('', `${live.memory.name} (the service's VmRSS, the median of samples taken after a pause, before opening and while open):`, '',
      '| Idle clients | Open | RSS before MB | RSS open MB | RSS after closing MB | Per connection KB |', '|---|---:|---:|---:|---:|---:|')
    for (const m of live.memory.idle) {
      lines.push(`| ${m.mode === 'sse' ? 'SSE streams' : 'held long-polls'} | ${int(m.open)} | ${m.beforeMb.toFixed(1)} | ${m.openMb.toFixed(1)} | ${m.afterCloseMb.toFixed(1)} | ${m.perConnectionKb.toFixed(1)} |`)
    }
  }
  const w = live.writePath
  if (w !== undefined) {
    lines.push('', `${w.name}: autocannon, ${w.connections} connections, ${w.seconds} s a round, rounds alternated between two services on one database:`, '',
      '| Live delivery | Rounds req/s (load average) | Mean req/s | Mean p99 ms | PostgreSQL CPU ms per created message |', '|---|---:|---:|---:|---:|')
    for (const setting of ['on', 'off'] as const) {
      const rounds = w.rounds.filter((r) => r.live === setting)
      const mean = roundsOf(w, setting)
      lines.push(`| ${setting === 'on' ? 'on, no client connected' : 'off (LIVE_MAX_CONNECTIONS=0)'} | ${rounds.map((r) => `${int(r.rps)} (${r.load.toFixed(1)})`).join(', ')} | ${int(mean.rps)} | ${ms(mean.p99)} | ` +
        `${mean.cpu === undefined ? '—' : mean.cpu.toFixed(3)} |`)
    }
    if (w.withClients !== undefined) {
      const c = w.withClients
      lines.push(`| on, ${int(c.clients)} SSE clients open | ${int(c.rps)} | ${int(c.rps)} | ${ms(c.p99)} | ${c.postgresCpuMsPerMessage === undefined ? '—' : c.postgresCpuMsPerMessage.toFixed(3)} |`,
        '', `With the ${int(c.clients)} SSE clients: ${int(c.created)} messages created, ${int(c.deliveriesPerSecond)} deliveries/s, delay p50 ${ms(c.delay.p50)} / p99 ${ms(c.delay.p99)} / max ${ms(c.delay.max)} ms; ` +
        `clients exact: ${exactCell(c.exact, c.clients)}.`)
    }
  }
  if (live.targets.length > 0) {
    lines.push('', 'Targets (reported, not enforced):', '', '| What | Measured | Target | Met |', '|---|---:|---:|---|')
    for (const t of live.targets) lines.push(`| ${t.what} | ${t.value} | ${t.target} | ${t.met === undefined ? '—' : t.met ? 'yes' : 'no'} |`)
  }
  return lines
}
