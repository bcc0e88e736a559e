/**
 * The delta sync section (CONTRACT 12), service only. A syncing client is sequential by nature (each call
 * needs the previous answer's token), so these are walks of GET /v2/messages/changes timed end to end,
 * not autocannon rows.
 */
import { request } from 'undici'
import { postBodies } from '../load/message-bodies.js'
import type { Tokens } from '../run/caller-tokens.js'
import { parseJson, type Item } from '../checks/answer-checks.js'
import { BenchError } from '../run/bench-error.js'
import { EVERYTHING, type Oracle } from '../checks/reference-sql.js'
import { sampleRss } from '../load/memory-and-health-probes.js'
import { int, type SyncReport } from '../report/bench-report.js'
import type { Server } from '../servers/child-servers.js'
import { settle } from '../database/wait-quiet.js'

interface ChangeEntry { op: string, id: number, message?: Item }
interface ChangesAnswer { data: ChangeEntry[], next: string, hasMore: boolean }
interface FeedWalk { next: string, calls: number, entries: number }

export const SYNC_LIMIT = 1000
// Far above the calls any walk here needs (1,001 for 1,000,000 messages at limit 1000): a feed that
// never says hasMore=false stops the walk instead of the benchmark hanging.
const MAX_SYNC_CALLS = 100_000
const SYNC_TARGET = 100_000
const CATCH_UP_WRITES = 1000
const CATCH_UP_CONCURRENCY = 10
const CATCH_UP_LIMITS = [100, SYNC_LIMIT]
// Each catch-up walk is a few calls of milliseconds: one is noise, so the same walk is repeated.
const CATCH_UP_RUNS = 5
// The walks of the initial sync differ by some 20 % on this machine from one to the next: the median of three.
const INITIAL_SYNC_RUNS = 3

/**
 * Follows GET /v2/messages/changes as a client does, from `since` (or from the start without it) until an
 * answer says hasMore=false: one call after another with undici `request`, every body parsed with JSON.parse
 * and handed to `visit`. Returns the caught-up token. A status other than 200 or a body that is not an
 * answer is a BenchError.
 */
export async function followFeed (base: string, since: string | undefined, limit: number, visit?: (answer: ChangesAnswer) => void): Promise<FeedWalk> {
  let token = since
  let calls = 0
  let entries = 0
  while (calls < MAX_SYNC_CALLS) {
    const path = `/v2/messages/changes?limit=${limit}${token === undefined ? '' : `&since=${encodeURIComponent(token)}`}`
    const response = await request(base + path, { headersTimeout: 30_000, bodyTimeout: 30_000 })
    const body = await response.body.text()
    calls++
    if (response.statusCode !== 200) throw new BenchError(`changes call ${calls} answered ${response.statusCode}: ${body.slice(0, 80)}`)
    const answer = JSON.parse(body) as ChangesAnswer
    if (!Array.isArray(answer.data) || typeof answer.next !== 'string' || typeof answer.hasMore !== 'boolean') {
      throw new BenchError(`changes call ${calls} is not an answer: ${body.slice(0, 80)}`)
    }
    entries += answer.data.length
    visit?.(answer)
    token = answer.next
    if (!answer.hasMore) return { next: token, calls, entries }
  }
  throw new BenchError(`the change feed still had more after ${MAX_SYNC_CALLS} calls of limit ${limit}`)
}

function median (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** The newest transaction in the change log: the same before and after a walk when nothing was written meanwhile. */
async function newestChange (oracle: Oracle): Promise<string | null> {
  const [row] = await oracle.rows<{ xid: string | null }>('select max(xid)::text as xid from message_changes')
  return row!.xid
}

interface TimedWalk { messages: number, calls: number, seconds: number }

/** One full initial sync with limit SYNC_LIMIT, its entries checked against the `count` messages there are. */
async function initialSync (base: string, count: number, run: number, problems: string[]): Promise<{ walk: FeedWalk, timed: TimedWalk }> {
  let upserts = 0
  let deletes = 0
  let lastId = 0
  let outOfOrder = 0
  let mislabelled = 0
  const started = performance.now()
  const walk = await followFeed(base, undefined, SYNC_LIMIT, (answer) => {
    for (const entry of answer.data) {
      if (entry.op !== 'upsert') {
        deletes++
        continue
      }
      upserts++
      if (entry.id <= lastId) outOfOrder++
      if (entry.message?.id !== entry.id) mislabelled++
      lastId = entry.id
    }
  })
  const timed = { messages: upserts + deletes, calls: walk.calls, seconds: (performance.now() - started) / 1000 }
  // On a database nobody writes to, the copy is every message once, in id order, and no change follows it.
  if (upserts !== count || deletes > 0 || outOfOrder > 0) {
    problems.push(`initial sync ${run + 1} sent ${upserts} upserts (${outOfOrder} out of id order) and ${deletes} deletes for ${count} messages`)
  }
  if (mislabelled > 0) problems.push(`${mislabelled} upserts of initial sync ${run + 1} carry a message of another id`)
  return { walk, timed }
}

/**
 * (a) The full initial sync with limit 1000, from no `since` until hasMore=false, INITIAL_SYNC_RUNS times (the
 *     median reported, each walk checked), and the service's peak RSS through them. Returns the last walk.
 */
async function initialSyncs (service: Server, oracle: Oracle, report: SyncReport): Promise<FeedWalk> {
  const { problems } = report
  const countBefore = await oracle.count(EVERYTHING)
  const newestBefore = await newestChange(oracle)
  const rss = sampleRss(service.process?.pid)
  const walks: TimedWalk[] = []
  let walk: FeedWalk | undefined
  try {
    for (let run = 0; run < INITIAL_SYNC_RUNS; run++) {
      const done = await initialSync(service.base, countBefore, run, problems)
      walk = done.walk
      walks.push(done.timed)
      await settle(oracle)
    }
  } finally {
    const peakRssMb = rss.stop()
    const rates = walks.map((w) => w.messages / w.seconds)
    const middle = walks.find((w) => w.messages / w.seconds === median(rates))
    if (middle !== undefined) report.initial = { limit: SYNC_LIMIT, ...middle, messagesPerSecond: middle.messages / middle.seconds, walks: rates, peakRssMb, target: SYNC_TARGET }
  }
  if (await oracle.count(EVERYTHING) !== countBefore || await newestChange(oracle) !== newestBefore) {
    problems.splice(0, problems.length, 'the database was written during the initial syncs (not by this benchmark): the measurement is disturbed and its exactness not checked')
  }
  return walk!
}

/** CATCH_UP_WRITES creates through the API, CATCH_UP_CONCURRENCY at a time, untimed by the walks; returns the created ids. */
async function catchUpWrites (service: Server, tokens: Tokens, report: SyncReport): Promise<number[]> {
  const writers = await tokens.post('sync')
  const bodies = postBodies()
  const created: number[] = []
  const failures: string[] = []
  let sent = 0
  const writesStarted = performance.now()
  await Promise.all(Array.from({ length: CATCH_UP_CONCURRENCY }, async () => {
    while (sent < CATCH_UP_WRITES) {
      const n = sent++
      const response = await request(`${service.base}/v2/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${writers[n % writers.length]!}` },
        body: bodies[n % bodies.length]!,
        headersTimeout: 30_000,
        bodyTimeout: 30_000
      })
      const body = await response.body.text()
      const id = (parseJson(body) as Item | undefined)?.id
      if (response.statusCode === 201 && typeof id === 'number') created.push(id)
      else failures.push(`${response.statusCode} ${body.slice(0, 80)}`)
    }
  }))
  report.writes = { count: created.length, seconds: (performance.now() - writesStarted) / 1000 }
  if (failures.length > 0) report.problems.push(`${failures.length} of ${CATCH_UP_WRITES} catch-up writes failed; the first: ${failures[0]!}`)
  return created
}

/** CATCH_UP_RUNS walks at `limit` from the same caught-up token; every created id must come as an upsert. */
async function catchUpWalks (service: Server, since: string, limit: number, created: number[], problems: string[]): Promise<SyncReport['catchUp'][number]> {
  const times: number[] = []
  let first: { entries: number, calls: number, missing: number } | undefined
  for (let run = 0; run < CATCH_UP_RUNS; run++) {
    const upserted = new Set<number>()
    const began = performance.now()
    const caught = await followFeed(service.base, since, limit, (answer) => {
      for (const entry of answer.data) if (entry.op === 'upsert') upserted.add(entry.id)
    })
    times.push(performance.now() - began)
    const missing = created.filter((id) => !upserted.has(id)).length
    first ??= { entries: caught.entries, calls: caught.calls, missing }
    if (missing > 0) problems.push(`catch-up with limit ${limit}, walk ${run + 1}: ${missing} of ${created.length} created ids did not come as an upsert by hasMore=false`)
  }
  return { limit, ...first!, firstMs: times[0]!, medianMs: median(times), runs: CATCH_UP_RUNS }
}

/**
 * The section: (a) the initial syncs, then (b) the catch-up after CATCH_UP_WRITES API writes (made first, not
 * timed): from one caught-up token until an answer says hasMore=false, at the default limit and at 1000.
 * A failure is recorded as a problem of the section; the rest of the benchmark goes on.
 */
export async function measureSync (service: Server, oracle: Oracle, tokens: Tokens): Promise<SyncReport> {
  const report: SyncReport = { catchUp: [], problems: [] }
  try {
    const walk = await initialSyncs(service, oracle, report)
    await settle(oracle)
    const created = await catchUpWrites(service, tokens, report)
    await settle(oracle)
    for (const limit of CATCH_UP_LIMITS) report.catchUp.push(await catchUpWalks(service, walk.next, limit, created, report.problems))
  } catch (err) {
    report.problems.push(err instanceof BenchError ? err.message : (err as Error).stack ?? String(err))
  }
  return report
}

export function printSync (sync: SyncReport): void {
  const parts: string[] = []
  const { initial } = sync
  if (initial !== undefined) {
    parts.push(`initial sync ${int(initial.messages)} messages in ${int(initial.calls)} calls, ${initial.seconds.toFixed(2)} s, ` +
      `${int(Math.round(initial.messagesPerSecond))} messages/s, peak RSS ${initial.peakRssMb.toFixed(0)} MB`)
  }
  for (const run of sync.catchUp) parts.push(`catch-up at limit ${run.limit} ${run.calls} calls ${run.firstMs.toFixed(1)} ms`)
  process.stdout.write(`bench: delta sync: ${parts.join('; ')}${sync.problems.length > 0 ? ' FAILED' : ''}\n`)
}
