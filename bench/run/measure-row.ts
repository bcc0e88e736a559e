/** One measurement: a row's load against one server, and every check of its answers, writes and health. */
import { runCannon, type CannonRequest, type CannonResult } from '../load/autocannon.js'
import { checkPage, checkPeerPage, lostWrites, messageCount, pageProblem, sampled, VERIFY_EVERY, withAcknowledged, type DeferredWrites } from '../checks/answer-checks.js'
import { BenchError } from './bench-error.js'
import { mergeSearchIndexes, type ServerCpu } from '../database/cpu-per-write.js'
import type { Oracle } from '../checks/reference-sql.js'
import { probeHealth, sampleRss } from '../load/memory-and-health-probes.js'
import { int, type Measurement } from '../report/bench-report.js'
import type { PeerRow, Row, Sequence } from '../rows/row.js'
import { logTail } from '../servers/server-logs.js'
import { running, type Server } from '../servers/child-servers.js'
import type { WriterResult } from '../load/steady-writer.js'
import { groupTotals, summarize } from '../database/write-groups.js'

export interface RunSettings {
  duration: number
  connections: number
  maxRequests: number
  /** The benchmark's own reader of the database; none on a target (--target), whose database it cannot read. */
  oracle?: Oracle
  deferred: DeferredWrites[]
  /** The database server's CPU clock, when it runs on this machine (bench/database/cpu-per-write.ts). */
  databaseCpu?: ServerCpu
  /**
   * Whether shed answers fail the row. On the benchmark's own servers they do, as every non-2xx answer
   * does (CONTRACT 9): its clients are spread so that none should be shed. On a target (--target) the
   * load comes from one machine through the deployment's own proxies, and shedding is its admission
   * control at work: counted apart, not a failure.
   */
  shedFails: boolean
}

// Answers of a cold row checked against the oracle after the row: each is a query of its own there.
const SEQUENCE_SAMPLES = 30

/**
 * The client a cold row's request stands for: each request another one, as many people each asking for
 * a page of their own are, behind the proxy the service trusts (TRUST_PROXY=127.0.0.1, ../servers/
 * child-servers.ts). The service shares its expensive reads among client addresses (CONTRACT 16): from
 * one address, the row would measure one client's share, not the service.
 */
export const clientAddress = (n: number): string => `10.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`

/**
 * Whether an answer is the service's admission control turning the request away (CONTRACT 16, and load
 * shedding, CONTRACT 11): 503 with Retry-After, counted as shed.
 */
const isShed = (status: number, headers: Record<string, string | string[] | undefined>): boolean =>
  status === 503 && Object.keys(headers).some((name) => name.toLowerCase() === 'retry-after')

/** Counts the shed answers of `requests` into `tally`, leaving whatever else each request does as it is. */
function countingShed (requests: CannonRequest[], tally: { shed: number }): CannonRequest[] {
  return requests.map((request) => ({
    ...request,
    onResponse: (status, body, context, headers) => {
      if (isShed(status, headers)) tally.shed++
      request.onResponse?.(status, body, context, headers)
    }
  }))
}

/** A cold row's requests: the next path of the sequence each time, every VERIFY_EVERY-th answer kept for checking. */
function sequenceRequests (sequence: Sequence, samples: Array<[string, string]>): CannonRequest[] {
  let sent = 0
  let answered = 0
  return [{
    method: 'GET',
    setupRequest: (request, context) => {
      const n = sent++
      const path = sequence.paths[n % sequence.paths.length]!
      context.path = path
      return { ...request, path, headers: { ...request.headers, 'x-forwarded-for': clientAddress(n) } }
    },
    onResponse: (status, body, context) => {
      if (status === 200 && answered++ % (sequence.sampleEvery ?? VERIFY_EVERY) === 0 && samples.length < SEQUENCE_SAMPLES) samples.push([String(context.path), body])
    }
  }]
}

/** A peer's requests, every VERIFY_EVERY-th 2xx answer checked with its headers (autocannon's verifyBody sees none). */
function peerRequests (peer: PeerRow, problems: string[]): CannonRequest[] {
  let answered = 0
  return peer.requests().map((request) => ({
    ...request,
    onResponse: (status, body, _context, headers) => {
      if (status < 200 || status > 299 || answered++ % VERIFY_EVERY !== 0) return
      const problem = peer.verify(body, headers)
      if (problem !== undefined && problems.length < 3) problems.push(`sampled body: ${problem}`)
    }
  }))
}

/** The page check of a row, before or after its load: the service's shape, or the peer's. */
async function checkRowPage (row: Row, child: Server, peer: PeerRow | undefined): Promise<string | undefined> {
  if (peer !== undefined) return peer.page === undefined ? undefined : await checkPeerPage(child.base, peer.page, peer.verify)
  return row.page === undefined ? undefined : await checkPage(child.base, row.page.path, row.page.expect)
}

interface Load {
  result: CannonResult
  written: WriterResult | undefined
  health: NonNullable<Measurement['health']>
  peakRssMb: number
  /** Cold rows: sampled answers, each with its path. */
  samples: Array<[string, string]>
  bodyProblems: string[]
  /** Answers 503 with Retry-After. */
  shed: number
}

/** The row's load on one server, with its RSS sampled, its liveness probed and the row's writer beside it. */
async function runLoad (row: Row, child: Server, peer: PeerRow | undefined, settings: RunSettings, acknowledged: number[] | undefined): Promise<Load> {
  const samples: Array<[string, string]> = []
  const tally = { shed: 0 }
  const rss = sampleRss(child.process?.pid)
  const probe = probeHealth(child.base + child.health)
  const bodyProblems: string[] = []
  const writer = row.writer?.(child)
  const result = await runCannon({
    url: child.base,
    connections: settings.connections,
    duration: row.duration ?? settings.duration,
    maxOverallRequests: row.sequence === undefined || row.sequence.repeat === true ? settings.maxRequests : Math.min(settings.maxRequests, row.sequence.paths.length),
    timeout: 10,
    requests: countingShed(peer !== undefined ? peerRequests(peer, bodyProblems) : row.sequence === undefined ? row.requests(child.name) : sequenceRequests(row.sequence, samples), tally),
    verifyBody: withAcknowledged(peer !== undefined || row.verify === undefined ? () => true : sampled(row.verify, bodyProblems), acknowledged)
  })
  const written = await writer?.stop()
  const health = await probe.stop()
  const peakRssMb = rss.stop()
  return { result, written, health, peakRssMb, samples, bodyProblems, shed: tally.shed }
}

/** A cold row's sampled answers, each checked against the oracle's exact answer to its path. */
async function sequenceProblems (sequence: Sequence, samples: Array<[string, string]>, requests: number): Promise<string[]> {
  const problems: string[] = []
  const wrong: string[] = []
  for (const [path, body] of samples) {
    const problem = pageProblem(body, await sequence.expect(path))
    if (problem !== undefined) wrong.push(`${path}: ${problem}`)
  }
  if (wrong.length > 0) problems.push(`${wrong.length} of ${samples.length} sampled answers are wrong; the first, ${wrong[0]!}`)
  if (samples.length === 0 && requests > 0) problems.push('no answer was sampled')
  return problems
}

/**
 * The answers that fail a row, by status: every one that is not 2xx nor one the row accepts; of the 503s,
 * the shed ones (`shed`, with Retry-After) only where `shedFails`.
 */
export function failingStatuses (stats: Record<string, { count: number }>, alsoOk: readonly number[], shed: number, shedFails: boolean): Array<[string, number]> {
  const failing: Array<[string, number]> = []
  for (const [code, { count }] of Object.entries(stats)) {
    if (code.startsWith('2') || alsoOk.includes(Number(code))) continue
    if (code !== '503') failing.push([code, count])
    else if (shedFails) failing.push([shed > 0 ? `503 (${shed} of them shed, with Retry-After)` : code, count])
    else if (count > shed) failing.push(['503 without Retry-After', count - shed])
  }
  return failing
}

/**
 * What autocannon counted: statuses that are not success, connection errors, an empty run, failed body
 * checks. Shed answers (503 with Retry-After) are failures where `shedFails`, else counted apart; a 503
 * without Retry-After is always one.
 */
function resultProblems (row: Row, peer: PeerRow | undefined, load: Load, shedFails: boolean): { problems: string[], non2xx: number } {
  const { result } = load
  const problems: string[] = []
  const errors = result.errors + result.timeouts
  const failing = failingStatuses(result.statusCodeStats, row.alsoOk ?? [], load.shed, shedFails)
  if (failing.length > 0) problems.push(`non-2xx responses: ${failing.map(([code, count]) => `${count}× ${code}`).join(', ')}`)
  const otherStatus = peer?.status === undefined ? [] : Object.entries(result.statusCodeStats).filter(([code]) => code.startsWith('2') && Number(code) !== peer.status)
  if (otherStatus.length > 0) problems.push(`answers other than ${peer!.status!}: ${otherStatus.map(([code, s]) => `${s.count}× ${code}`).join(', ')}`)
  if (errors > 0) problems.push(`${result.errors} connection errors (${result.timeouts} timeouts)`)
  if (result.requests.total === 0) problems.push('no request completed within the duration')
  if (result.mismatches > 0 && load.bodyProblems.length === 0) problems.push(`${result.mismatches} sampled bodies failed the checks`)
  return { problems, non2xx: failing.reduce((n, [, count]) => n + count, 0) }
}

/** The problems of the writer beside the row, after printing what it wrote. */
function writerProblems (row: Row, child: Server, written: WriterResult): string[] {
  process.stdout.write(`bench: ${row.name} (${child.name}): ${int(written.created)} writes in ${written.seconds.toFixed(1)} s beside it\n`)
  return written.created === 0 ? [...written.problems, 'the writer wrote nothing'] : written.problems
}

export async function measure (row: Row, child: Server, settings: RunSettings): Promise<Measurement> {
  const { oracle } = settings
  // The peer answers in a shape of its own, so its rows carry their own requests and checks.
  const peer = child.name === 'platformatic' ? row.platformatic : undefined
  if (child.name === 'platformatic' && peer === undefined) throw new BenchError(`"${row.name}" has no Platformatic equivalent`)
  await row.prepare?.()
  const problems: string[] = []
  const before = await checkRowPage(row, child, peer)
  if (before !== undefined) problems.push(`before the run, ${before}`)
  // The ceiling answers a create without writing it: there is nothing to count. A target's writes are
  // not counted either: its database is not readable here, and others may write to it meanwhile.
  const counter = row.countsWrites === true && child.name !== 'ceiling' ? oracle : undefined
  const countBefore = counter !== undefined ? await messageCount(counter, child.base) : 0
  const acknowledged: number[] = []
  const groupsBefore = counter !== undefined && child.name === 'service' ? await groupTotals(child.base) : undefined
  // What the database spends on the row's writes, the merge of the search indexes' lists they fill included.
  const cpu = counter?.live === true ? settings.databaseCpu : undefined
  if (cpu !== undefined) await mergeSearchIndexes(counter!)
  const cpuBefore = cpu?.()
  const load = await runLoad(row, child, peer, settings, counter !== undefined ? acknowledged : undefined)
  if (cpu !== undefined) await mergeSearchIndexes(counter!)
  const databaseCpu = cpuBefore === undefined ? undefined : cpu!() - cpuBefore
  const groups = groupsBefore === undefined ? undefined : summarize(groupsBefore, await groupTotals(child.base))
  if (load.written !== undefined) problems.push(...writerProblems(row, child, load.written))
  if (!running(child)) throw new BenchError(`the ${child.name} server exited during "${row.name}" (${child.log}):\n${logTail(child.log)}`)
  problems.push(...load.bodyProblems)
  if (load.health.failed > 0) problems.push(`${load.health.failed} of ${load.health.count} ${child.health} probes failed`)
  if (row.sequence !== undefined) problems.push(...await sequenceProblems(row.sequence, load.samples, load.result.requests.total))
  const after = await checkRowPage(row, child, peer)
  if (after !== undefined) problems.push(`after the run, ${after}`)
  let databaseUsPerWrite: number | undefined
  if (counter !== undefined) {
    const added = await messageCount(counter, child.base) - countBefore
    if (databaseCpu !== undefined && added > 0) databaseUsPerWrite = databaseCpu / added * 1e6
    if (counter.live) problems.push(...await lostWrites(counter, acknowledged, added, settings.connections))
    else settings.deferred.push({ row: `${row.name} (${child.name})`, acknowledged, added, connections: settings.connections })
  }
  const counted = resultProblems(row, peer, load, settings.shedFails)
  problems.push(...counted.problems)
  const { result } = load
  // A cold row that runs out of its sequence ends early, inside a second: autocannon's average of whole
  // seconds would round its rate, so it is the requests over the time they took. Shed answers come at
  // once and cost next to nothing: the rate is that of the answers served, the shed ones counted apart.
  const served = result.requests.total - load.shed
  const rps = row.sequence !== undefined && result.duration > 0
    ? served / result.duration
    : result.requests.average * (result.requests.total > 0 ? served / result.requests.total : 1)
  return {
    requests: result.requests.total,
    rps,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: counted.non2xx,
    shed: load.shed,
    errors: result.errors + result.timeouts,
    peakRssMb: load.peakRssMb,
    health: load.health,
    databaseUsPerWrite,
    groups,
    problems
  }
}
