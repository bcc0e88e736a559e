/**
 * The catch-up load client: a process of its own (started by catch-up.ts and fair.ts, never imported)
 * holding SSE streams of GET /v2/messages/changes, each read through a link of its own at a fixed rate
 * (bytes a second): a phone back from the background on a slow network, catching up from where it
 * stopped (or, with no position, from the start of the initial copy). It
 * counts bytes and reads only what it must: the `id` lines (to resume after a cut-off, as an
 * EventSource does) and the end of each `data` line (whether the answer says `"hasMore":false`).
 * Bounded: it exits at CATCH_UP_LIFETIME_S, and when the benchmark goes away.
 */
import { Agent, request, type IncomingMessage } from 'node:http'

export type ToCatchUpClient =
  /** One stream per position; null: the initial copy. */
  | { kind: 'start', base: string, positions: Array<string | null>, limit: number, bytesPerSecond: number }
  | { kind: 'stop' }

export interface CaughtUpStream {
  bytes: number
  /** From the first request to the first answer that said hasMore false; undefined if it never came. */
  ms: number | undefined
  /** From the first request to its first byte read. */
  firstByteMs: number | undefined
  /** Streams the server ended, or that failed, before it caught up. */
  cutOffs: number
  /** Requests after the first. */
  reconnects: number
}

export type FromCatchUpClient = { kind: 'started' } | { kind: 'done', streams: CaughtUpStream[], errors: string[] }

const TICK_MS = 20
const LIFETIME_S = Number(process.env.CATCH_UP_LIFETIME_S ?? 1800)
const MAX_RECONNECTS = 20
const ID = Buffer.from('id: ')
const CAUGHT_UP = Buffer.from('"hasMore":false}')

interface Stream extends CaughtUpStream {
  since: string | null
  lastId: string | undefined
  began: number
  response: IncomingMessage | undefined
  /** The line being read: its first bytes (to tell an id line) and its last (to tell the end of an answer). */
  head: Buffer
  tail: Buffer
  idLine: Buffer[] | undefined
}

const send = (message: FromCatchUpClient): void => { process.send?.(message) }
const agent = new Agent({ keepAlive: false, maxSockets: Infinity })
const streams: Stream[] = []
const errors: string[] = []
let plan: Extract<ToCatchUpClient, { kind: 'start' }> | undefined
let ticker: NodeJS.Timeout | undefined
let finished = false

function fail (text: string): void {
  if (errors.length < 5) errors.push(text)
}

/** The bytes of one stream's body, as they are read: lines, of which only ids and data ends matter. */
function scan (stream: Stream, bytes: Buffer): void {
  let from = 0
  while (from < bytes.length) {
    const newline = bytes.indexOf(10, from)
    const end = newline < 0 ? bytes.length : newline
    const part = bytes.subarray(from, end)
    if (stream.head.length < ID.length) stream.head = Buffer.concat([stream.head, part.subarray(0, ID.length - stream.head.length)])
    if (stream.idLine !== undefined) stream.idLine.push(part)
    else if (stream.head.length >= ID.length && stream.head.equals(ID)) stream.idLine = [part]
    stream.tail = part.length >= CAUGHT_UP.length ? part.subarray(part.length - CAUGHT_UP.length) : Buffer.concat([stream.tail, part]).subarray(-CAUGHT_UP.length)
    if (newline < 0) return
    // A line ends.
    if (stream.idLine !== undefined) stream.lastId = Buffer.concat(stream.idLine).subarray(ID.length).toString('latin1')
    else if (stream.ms === undefined && stream.tail.equals(CAUGHT_UP)) stream.ms = performance.now() - stream.began
    stream.head = Buffer.alloc(0)
    stream.tail = Buffer.alloc(0)
    stream.idLine = undefined
    from = newline + 1
  }
}

function open (stream: Stream): void {
  const p = plan!
  const headers: Record<string, string> = { accept: 'text/event-stream' }
  if (stream.lastId !== undefined) headers['last-event-id'] = stream.lastId
  const query = stream.since === null ? `limit=${p.limit}` : `since=${stream.since}&limit=${p.limit}`
  const req = request(`${p.base}/v2/messages/changes?${query}`, { agent, headers }, (response) => {
    if (response.statusCode !== 200) {
      fail(`stream answered ${response.statusCode}`)
      response.resume()
      reopen(stream)
      return
    }
    // Read only by the ticker, at the link's rate: the socket stops reading from the system meanwhile.
    response.pause()
    stream.response = response
    stream.head = Buffer.alloc(0)
    stream.tail = Buffer.alloc(0)
    stream.idLine = undefined
    response.on('readable', () => {})
    const ended = (): void => {
      if (stream.response !== response) return
      stream.response = undefined
      if (!finished && stream.ms === undefined) reopen(stream)
    }
    response.on('end', ended)
    response.on('close', ended)
    response.on('error', () => {})
  })
  req.on('error', (err) => {
    fail(`stream failed: ${err.message}`)
    if (!finished && stream.ms === undefined) reopen(stream)
  })
  req.end()
}

function reopen (stream: Stream): void {
  stream.cutOffs++
  if (finished || stream.reconnects >= MAX_RECONNECTS) return
  stream.reconnects++
  setTimeout(() => { open(stream) }, 200)
}

function tick (): void {
  const allowance = Math.max(1, Math.floor(plan!.bytesPerSecond * TICK_MS / 1000))
  let done = 0
  for (const stream of streams) {
    if (stream.ms !== undefined) done++
    const response = stream.response
    if (response === undefined) continue
    let left = allowance
    while (left > 0 && response.readableLength > 0) {
      const bytes = response.read(Math.min(left, response.readableLength)) as Buffer | null
      if (bytes === null) break
      left -= bytes.length
      stream.firstByteMs ??= performance.now() - stream.began
      stream.bytes += bytes.length
      scan(stream, bytes)
    }
  }
  if (done === streams.length) finish()
}

function finish (): void {
  if (finished) return
  finished = true
  if (ticker !== undefined) clearInterval(ticker)
  for (const stream of streams) stream.response?.destroy()
  send({ kind: 'done', streams: streams.map(({ bytes, ms, firstByteMs, cutOffs, reconnects }) => ({ bytes, ms, firstByteMs, cutOffs, reconnects })), errors })
  agent.destroy()
}

process.on('message', (message: ToCatchUpClient) => {
  if (message.kind === 'stop') {
    finish()
    return
  }
  plan = message
  const began = performance.now()
  for (const since of message.positions) {
    const stream: Stream = { since, lastId: undefined, began, bytes: 0, ms: undefined, firstByteMs: undefined, cutOffs: 0, reconnects: 0, response: undefined, head: Buffer.alloc(0), tail: Buffer.alloc(0), idLine: undefined }
    streams.push(stream)
    open(stream)
  }
  ticker = setInterval(tick, TICK_MS)
  send({ kind: 'started' })
})
process.on('disconnect', () => { process.exit(0) })
setTimeout(() => { process.exit(1) }, LIFETIME_S * 1000).unref()
