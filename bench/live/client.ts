/**
 * The live load client: a process of its own (started by fleet.ts, never imported), holding up to 10,000
 * clients of GET /v2/messages/changes open on loopback, as SSE streams or long-poll loops. It records when
 * each client first receives each write, turns that into a delay from the write's commit (times sent by the
 * benchmark as the writer learns them), and at the end checks that every client holds every write in an
 * order its commits allow. Only counts and a histogram go back over IPC, never a number per receipt.
 * Bounded: it exits at LIVE_CLIENT_LIFETIME_S, when the benchmark goes away, and after MAX_POLLS calls a client.
 */
import { Agent, request, type ClientRequest, type IncomingMessage } from 'node:http'
import { DelayHistogram } from './histogram.js'
import { UNKNOWN_COMMIT, wallClock, type CommittedWrite, type ExactnessReport, type FromClient, type ToClient, type WindowReport } from './protocol.js'

const OPEN_BATCH = 250
const MAX_POLLS = 100_000
const MAX_RECONNECTS = 20
const RETRY_MS = 200
// The row's writes are offsets from its first id; anything further is not one of them.
const MAX_OFFSET = 50_000_000
const POLL_WAIT_S = 30
const REQUEST_TIMEOUT_MS = (POLL_WAIT_S + 40) * 1000
const PARSED_CACHE = 512

interface Answer { upserts: number[], deletes: number, next: string, wrongMessages: number }

const send = (message: FromClient): void => { process.send?.(message) }

class Grown {
  array: Int32Array
  length = 0
  constructor (size: number) { this.array = new Int32Array(size) }
  push (value: number): void {
    if (this.length === this.array.length) {
      const bigger = new Int32Array(this.array.length * 2)
      bigger.set(this.array)
      this.array = bigger
    }
    this.array[this.length++] = value
  }
}

interface Connection {
  index: number
  /** One byte per offset: whether this client has received that write. */
  seen: Uint8Array
  /** Offsets in the order this client first received them. */
  order: Grown
  next: string
  request?: ClientRequest
  polls: number
  reconnects: number
}

let agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: Infinity })
let settings: Extract<ToClient, { kind: 'open' }> | undefined
let connections: Connection[] = []
let closing = false
let commitTimes = new Float64Array(1024).fill(Number.NaN)
let pending: number[] = []
let total = new DelayHistogram()
let windowed = new DelayHistogram()
const counts = { events: 0, entries: 0, first: 0, last: 0 }
const windowCounts = { events: 0, entries: 0, first: 0, last: 0 }
const problems = { errors: [] as string[], errorCount: 0, reconnects: 0, repeated: 0, unexpected: 0, wrongMessages: 0 }
const parsed = new Map<string, Answer>()

function fail (text: string): void {
  problems.errorCount++
  if (problems.errors.length < 5) problems.errors.push(text)
}

function commitOf (offset: number): number {
  return offset < commitTimes.length ? commitTimes[offset]! : Number.NaN
}

function setCommit (id: number, time: number): void {
  const offset = id - settings!.baseId
  if (offset < 0 || offset >= MAX_OFFSET) return
  if (offset >= commitTimes.length) {
    let size = commitTimes.length
    while (size <= offset) size *= 2
    const bigger = new Float64Array(size).fill(Number.NaN)
    bigger.set(commitTimes)
    commitTimes = bigger
  }
  commitTimes[offset] = time
}

function recordDelay (ms: number): void {
  total.record(ms)
  windowed.record(ms)
}

/** Receipts that came before their commit time: recorded once it is known. */
function resolvePending (): void {
  const still: number[] = []
  for (let i = 0; i < pending.length; i += 2) {
    const commit = commitOf(pending[i]!)
    if (Number.isNaN(commit)) still.push(pending[i]!, pending[i + 1]!)
    else recordDelay(pending[i + 1]! - commit)
  }
  pending = still
}

/** The changes of an answer; the same bytes go to every client at one position, so they are parsed once. */
function parseAnswer (payload: string): Answer {
  const known = parsed.get(payload)
  if (known !== undefined) return known
  const body = JSON.parse(payload) as { data: Array<{ op: string, id: number, message?: { id?: number } }>, next: string }
  const answer: Answer = { upserts: [], deletes: 0, next: body.next, wrongMessages: 0 }
  for (const entry of body.data) {
    if (entry.op === 'upsert') {
      answer.upserts.push(entry.id)
      if (entry.message?.id !== entry.id) answer.wrongMessages++
    } else answer.deletes++
  }
  if (parsed.size >= PARSED_CACHE) parsed.clear()
  parsed.set(payload, answer)
  return answer
}

function receive (connection: Connection, payload: string, now: number): boolean {
  let answer: Answer
  try {
    answer = parseAnswer(payload)
  } catch {
    fail(`client ${connection.index}: not an answer: ${payload.slice(0, 80)}`)
    return false
  }
  connection.next = answer.next
  const size = answer.upserts.length + answer.deletes
  if (size === 0) return false
  for (const c of [counts, windowCounts]) {
    c.events++
    c.entries += size
    if (c.first === 0) c.first = now
    c.last = now
  }
  problems.unexpected += answer.deletes
  problems.wrongMessages += answer.wrongMessages
  const base = settings!.baseId
  for (const id of answer.upserts) {
    const offset = id - base
    if (offset < 0 || offset >= MAX_OFFSET) {
      problems.unexpected++
      continue
    }
    if (offset >= connection.seen.length) {
      let size = connection.seen.length
      while (size <= offset) size *= 2
      const bigger = new Uint8Array(size)
      bigger.set(connection.seen)
      connection.seen = bigger
    }
    if (connection.seen[offset] === 1) {
      problems.repeated++
      continue
    }
    connection.seen[offset] = 1
    connection.order.push(offset)
    const commit = commitOf(offset)
    if (Number.isNaN(commit)) pending.push(offset, now)
    else recordDelay(now - commit)
  }
  return true
}

function changesPath (since: string, wait: boolean): string {
  return `/v2/messages/changes?since=${since}${wait ? `&wait=${POLL_WAIT_S}` : ''}`
}

/** Tries again after the answer's Retry-After (as a client of CONTRACT 13 does), else RETRY_MS; gives up after MAX_RECONNECTS failures in a row. */
function retry (connection: Connection, start: (c: Connection) => void, retryAfter?: string | string[]): void {
  if (closing) return
  if (++connection.reconnects > MAX_RECONNECTS) {
    fail(`client ${connection.index}: gave up after ${MAX_RECONNECTS} failures in a row`)
    return
  }
  problems.reconnects++
  const seconds = Number(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter)
  setTimeout(() => start(connection), Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : RETRY_MS)
}

function readBody (response: IncomingMessage, done: (body: string) => void): void {
  let body = ''
  response.setEncoding('utf8')
  response.on('data', (chunk: string) => { body += chunk })
  response.on('end', () => done(body))
}

/** One long-poll after another from the client's position, as a client of CONTRACT 13 loops. */
function poll (connection: Connection): void {
  if (closing || connection.polls++ >= MAX_POLLS) return
  const req = request(settings!.base + changesPath(connection.next, true), { agent, timeout: REQUEST_TIMEOUT_MS }, (response) => {
    readBody(response, (body) => {
      if (closing) return
      if (response.statusCode !== 200) {
        fail(`client ${connection.index}: long-poll answered ${response.statusCode}: ${body.slice(0, 80)}`)
        retry(connection, poll, response.headers['retry-after'])
        return
      }
      connection.reconnects = 0
      receive(connection, body, wallClock())
      poll(connection)
    })
  })
  connection.request = req
  req.on('timeout', () => req.destroy(new Error('no answer within the request timeout')))
  req.on('error', (err) => {
    if (closing) return
    fail(`client ${connection.index}: long-poll failed: ${err.message}`)
    retry(connection, poll)
  })
  req.end()
}

/** Refusals an open tries again (after Retry-After): the service shedding load or full for a moment. */
const OPEN_TRIES = 10

/** Splits the stream into events (a blank line ends one) and hands each `data:` to receive(). */
function stream (connection: Connection, onOpen?: (ok: boolean, problem?: string) => void, attempt = 1): void {
  if (closing) return
  // Only the first answer or failure of the first stream is the open's; later ones are reconnected.
  let opened = onOpen
  const settle = (ok: boolean, problem?: string): boolean => {
    if (opened === undefined) return false
    opened(ok, problem)
    opened = undefined
    return true
  }
  const req = request(settings!.base + changesPath(connection.next, false), {
    agent,
    headers: { accept: 'text/event-stream', ...(connection.next === settings!.since ? {} : { 'last-event-id': connection.next }) }
  }, (response) => {
    if (response.statusCode !== 200) {
      readBody(response, (body) => {
        const problem = `client ${connection.index}: stream answered ${response.statusCode}: ${body.slice(0, 80)}`
        if (opened !== undefined && (response.statusCode === 503 || response.statusCode === 429) && attempt < OPEN_TRIES) {
          const again = opened
          opened = undefined
          problems.reconnects++
          setTimeout(() => stream(connection, again, attempt + 1), Number(response.headers['retry-after'] ?? 1) * 1000)
          return
        }
        if (!settle(false, problem)) {
          fail(problem)
          retry(connection, stream, response.headers['retry-after'])
        }
      })
      return
    }
    settle(true)
    connection.reconnects = 0
    response.setEncoding('utf8')
    let buffer = ''
    response.on('data', (chunk: string) => {
      const now = wallClock()
      buffer += chunk
      let end = buffer.indexOf('\n\n')
      while (end !== -1) {
        let id: string | undefined
        let data = ''
        for (const line of buffer.slice(0, end).split('\n')) {
          if (line.startsWith('data:')) data += (data === '' ? '' : '\n') + line.slice(line.startsWith('data: ') ? 6 : 5)
          else if (line.startsWith('id:')) id = line.slice(line.startsWith('id: ') ? 4 : 3)
        }
        buffer = buffer.slice(end + 2)
        end = buffer.indexOf('\n\n')
        if (data === '') continue
        receive(connection, data, now)
        if (id !== undefined && id !== connection.next) fail(`client ${connection.index}: event id is not the answer's next`)
        if (id !== undefined) connection.next = id
      }
    })
    response.on('end', () => {
      if (closing) return
      fail(`client ${connection.index}: the stream ended`)
      retry(connection, stream)
    })
  })
  connection.request = req
  req.on('error', (err) => {
    if (closing) return
    if (!settle(false, `client ${connection.index}: ${err.message}`)) {
      fail(`client ${connection.index}: stream failed: ${err.message}`)
      retry(connection, stream)
    }
  })
  req.end()
}

async function open (message: Extract<ToClient, { kind: 'open' }>): Promise<void> {
  settings = message
  closing = false
  const began = performance.now()
  const failures: string[] = []
  let open = 0
  for (let from = 0; from < message.connections; from += OPEN_BATCH) {
    const batch: Array<Promise<void>> = []
    for (let index = from; index < Math.min(message.connections, from + OPEN_BATCH); index++) {
      const connection: Connection = { index, seen: new Uint8Array(256), order: new Grown(256), next: message.since, polls: 0, reconnects: 0 }
      connections.push(connection)
      if (message.mode === 'poll') {
        poll(connection)
        open++
        continue
      }
      batch.push(new Promise((resolve) => {
        stream(connection, (ok, problem) => {
          if (ok) open++
          else if (failures.length < 5) failures.push(problem ?? 'failed')
          resolve()
        })
      }))
    }
    await Promise.all(batch)
    // Long-polls give no sign that they are held: a pause per batch spreads their connects out.
    if (message.mode === 'poll') await new Promise((resolve) => setTimeout(resolve, 20))
  }
  send({ kind: 'opened', open, failures, seconds: (performance.now() - began) / 1000 })
}

function takeWindow (): WindowReport {
  resolvePending()
  const report = { delay: windowed.stats(), ...windowCounts }
  windowed = new DelayHistogram()
  Object.assign(windowCounts, { events: 0, entries: 0, first: 0, last: 0 })
  return report
}

function closeAll (): void {
  closing = true
  for (const connection of connections) connection.request?.destroy()
  agent.destroy()
}

/** The position a token stands for, without when it was issued: base64url of `1.<kind>.<epoch>.<xid>.<id>.<issuedAt>`. */
function positionOf (token: string): string {
  return Buffer.from(token, 'base64url').toString('latin1').split('.').slice(0, 5).join('.')
}

function check (writes: CommittedWrite[], drainMs: number): ExactnessReport {
  const base = settings!.baseId
  let size = 1
  for (const w of writes) size = Math.max(size, w.id - base + 1)
  const written = new Uint8Array(size)
  const starts = new Float64Array(size)
  const commits = new Float64Array(size)
  for (const w of writes) {
    const offset = w.id - base
    if (offset < 0 || offset >= size) continue
    written[offset] = 1
    starts[offset] = w.start
    commits[offset] = w.commit
  }
  const report: ExactnessReport = { complete: 0, missing: 0, missingExample: [], outOfOrder: 0, unexpected: problems.unexpected, repeated: problems.repeated, orders: 0, positions: 0, drainMs }
  const orders = new Set<number>()
  const positions = new Set<string>()
  for (const connection of connections) {
    let held = 0
    let latestStart = -Infinity
    let latestId = 0
    let hash = 0x811c9dc5
    let disordered: string | undefined
    const { array, length } = connection.order
    for (let i = 0; i < length; i++) {
      const offset = array[i]!
      if (offset >= size || written[offset] !== 1) {
        report.unexpected++
        continue
      }
      held++
      hash = Math.imul(hash ^ offset, 16777619)
      // A write that committed before an earlier-received one began must have come first.
      if (commits[offset]! < latestStart && disordered === undefined) disordered = `id ${offset + base} (committed at +${(commits[offset]! - starts[0]!).toFixed(1)} ms) came after id ${latestId}, which began later`
      if (starts[offset]! > latestStart) {
        latestStart = starts[offset]!
        latestId = offset + base
      }
    }
    if (held === writes.length) report.complete++
    else {
      report.missing += writes.length - held
      if (report.missingExample.length === 0) report.missingExample = writes.filter((w) => connection.seen[w.id - base] !== 1).slice(0, 5).map((w) => w.id)
    }
    if (disordered !== undefined) {
      report.outOfOrder++
      report.outOfOrderExample ??= `client ${connection.index}: ${disordered}`
    }
    orders.add(hash)
    positions.add(positionOf(connection.next))
  }
  report.orders = orders.size
  report.positions = positions.size
  return report
}

async function finish (writes: CommittedWrite[], drainMs: number): Promise<void> {
  for (const w of writes) if (w.commit !== UNKNOWN_COMMIT) setCommit(w.id, w.commit)
  const began = performance.now()
  // Quick test while waiting: a client has as many first receipts as there are writes.
  while (performance.now() - began < drainMs && connections.some((c) => c.order.length < writes.length)) {
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const drained = performance.now() - began
  closeAll()
  resolvePending()
  const exact = check(writes, drained)
  if (problems.wrongMessages > 0) fail(`${problems.wrongMessages} upserts carried a message of another id`)
  send({ kind: 'finished', total: { delay: total.stats(), ...counts }, exact, reconnects: problems.reconnects, errors: problems.errors, errorCount: problems.errorCount })
}

function reset (): void {
  connections = []
  commitTimes = new Float64Array(1024).fill(Number.NaN)
  pending = []
  total = new DelayHistogram()
  windowed = new DelayHistogram()
  parsed.clear()
  Object.assign(counts, { events: 0, entries: 0, first: 0, last: 0 })
  Object.assign(windowCounts, { events: 0, entries: 0, first: 0, last: 0 })
  Object.assign(problems, { errors: [], errorCount: 0, reconnects: 0, repeated: 0, unexpected: 0, wrongMessages: 0 })
  agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: Infinity })
}

process.on('message', (message: ToClient) => {
  switch (message.kind) {
    case 'open':
      reset()
      open(message).catch((err: Error) => send({ kind: 'opened', open: 0, failures: [err.message], seconds: 0 }))
      break
    case 'commits':
      for (let i = 0; i < message.ids.length; i++) setCommit(message.ids[i]!, message.times[i]!)
      if (pending.length > 0) resolvePending()
      break
    case 'window':
      send({ kind: 'window', window: takeWindow() })
      break
    case 'finish':
      finish(message.writes, message.drainMs).catch((err: Error) => fail(err.message))
      break
    case 'close':
      closeAll()
      send({ kind: 'closed', reconnects: problems.reconnects, errors: problems.errors, errorCount: problems.errorCount })
      break
  }
})
// The benchmark gone (finished, killed, interrupted): nothing is left to report to.
process.on('disconnect', () => process.exit(0))
setTimeout(() => process.exit(2), Number(process.env.LIVE_CLIENT_LIFETIME_S ?? 1800) * 1000).unref()
