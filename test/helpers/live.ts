import { request as httpRequest, type ClientRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Test } from 'tap'
import { Agent, request } from 'undici'
import type { App } from '../../src/app.js'
import type { AppConfig } from '../../src/config.js'
import { build, type BuildTestOptions } from './build.js'
import { bounded } from './bounded.js'
import type { SyncMessage } from './sync-client.js'

// CONTRACT 13 from outside: a server on loopback, long-polls over undici, Server-Sent Events read off
// the wire by node:http (so the framing itself is checked), the live gauges from /metrics, and a copy
// that applies answers and refuses one out of order.

export const CHANGES = '/v2/messages/changes'
export const INVALID = { error: 'Invalid sync token' }
export const EXPIRED = { error: 'Sync token expired' }

export interface Entry { op: 'upsert' | 'delete', id: number, message?: SyncMessage }
export interface Answer { data: Entry[], next: string, hasMore: boolean }

/** A fresh app (with the x-test-user stub) listening on 127.0.0.1, and its address. */
export async function listen (t: Test, config: Partial<AppConfig> = {}, options: Omit<BuildTestOptions, 'config'> = {}): Promise<{ app: App, url: string }> {
  const app = await build(t, { testAuth: true, ...options, config })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  clientsOf(t, url)
  return { app, url }
}

const agents = new Map<string, Agent>()

/**
 * The connections `get` makes to `url`'s server, destroyed when the test ends and before the app
 * closes (teardowns run last first): a keep-alive socket the client still holds would keep close()
 * waiting for the server's idle timeout.
 */
export function clientsOf (t: Test, url: string): void {
  const agent = new Agent()
  const origin = new URL(url).origin
  agents.set(origin, agent)
  t.teardown(async () => {
    agents.delete(origin)
    await agent.destroy()
  })
}

export function changesUrl (base: string, query: Record<string, string | undefined> = {}): string {
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(query)) if (value !== undefined) params.set(name, value)
  const search = params.toString()
  return `${base}${CHANGES}${search === '' ? '' : `?${search}`}`
}

export interface Polled { status: number, headers: Record<string, string | string[] | undefined>, text: string, body: unknown }

/** One GET over HTTP (a long-poll may be held): the status, headers and whole body. */
export async function get (url: string, options: { headers?: Record<string, string>, signal?: AbortSignal } = {}): Promise<Polled> {
  const res = await request(url, { headers: options.headers, signal: options.signal, dispatcher: agents.get(new URL(url).origin) })
  const text = await res.body.text()
  let body: unknown
  try { body = JSON.parse(text) } catch { body = undefined }
  return { status: res.statusCode, headers: res.headers, text, body }
}

/** A started request whose settling can be looked at without awaiting it. */
export interface Pending<T> { promise: Promise<T>, settled: () => boolean, settledAt: () => number | undefined }

export function pending<T> (promise: Promise<T>): Pending<T> {
  let at: number | undefined
  const watched = promise.finally(() => { at = performance.now() })
  watched.catch(() => {})
  return { promise: watched, settled: () => at !== undefined, settledAt: () => at }
}

/** The sum of every sample of `name` (a gauge, a counter, or a histogram's `_count`) in a Prometheus text. */
export function metricValue (text: string, name: string): number | undefined {
  let found: number | undefined
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/.exec(line)
    if (match?.[1] === name) found = (found ?? 0) + Number(match[3])
  }
  return found
}

export async function scrape (app: App): Promise<string> {
  const res = await app.inject({ url: '/metrics' })
  if (res.statusCode !== 200) throw new Error(`GET /metrics: ${res.statusCode} ${res.body}`)
  return res.body
}

/** Waits until `name` satisfies `ok` in /metrics (read by `read`); the last value is in the error. */
export async function untilMetric (read: () => Promise<string>, name: string, ok: (value: number | undefined) => boolean, ms = 20_000): Promise<number | undefined> {
  const deadline = performance.now() + ms
  let value: number | undefined
  for (;;) {
    value = metricValue(await read(), name)
    if (ok(value)) return value
    if (performance.now() > deadline) throw new Error(`${name} is ${String(value)} after ${ms} ms`)
    await sleep(10)
  }
}

export const heldPolls = (app: App, n: number): Promise<number | undefined> => untilMetric(() => scrape(app), 'live_long_polls_held', (v) => v === n)
export const openStreams = (app: App, n: number): Promise<number | undefined> => untilMetric(() => scrape(app), 'live_streams_open', (v) => v === n)

/**
 * Settles `request` while watching the held-long-poll gauge: 'held' if the gauge showed one held
 * before the answer came (the request was held), else the answer. For requests that must be
 * answered at once; the gauge is read in a loop, so no clock decides.
 */
export async function answeredWithoutHolding<T> (app: App, request: Pending<T>, before = 0): Promise<T | 'held'> {
  while (!request.settled()) {
    const held = metricValue(await scrape(app), 'live_long_polls_held') ?? 0
    if (held > before && !request.settled()) return 'held'
    await Promise.race([request.promise.catch(() => {}), sleep(5)])
  }
  return await request.promise
}

export type Block =
  | { kind: 'event', id: string, event: string, data: string, answer: Answer }
  | { kind: 'comment', text: string, id: string | undefined }
  | { kind: 'malformed', text: string, why: string }

/** One block of an event stream (the text between two blank lines), as CONTRACT 13 frames it. */
export function parseBlock (text: string): Block {
  const lines = text.split('\n')
  // A keep-alive: comment lines, and at most one `id:` line, which moves the client's last event id without an event.
  const ids = lines.filter((line) => !line.startsWith(':'))
  if (ids.length === 0) return { kind: 'comment', text, id: undefined }
  if (ids.length === 1 && ids[0]!.startsWith('id: ') && lines.length > 1) return { kind: 'comment', text, id: ids[0]!.slice(4) }
  const [idLine, eventLine, dataLine, ...rest] = lines
  if (rest.length > 0 || idLine === undefined || eventLine === undefined || dataLine === undefined ||
    !idLine.startsWith('id: ') || eventLine !== 'event: changes' || !dataLine.startsWith('data: ')) {
    return { kind: 'malformed', text, why: 'not "id: <next>\\nevent: changes\\ndata: <json>"' }
  }
  const id = idLine.slice(4)
  const data = dataLine.slice(6)
  let answer: Answer
  try {
    answer = JSON.parse(data) as Answer
  } catch {
    return { kind: 'malformed', text, why: 'data is not JSON' }
  }
  if (JSON.stringify(Object.keys(answer)) !== '["data","next","hasMore"]') return { kind: 'malformed', text, why: 'keys of the answer' }
  if (answer.next !== id) return { kind: 'malformed', text, why: 'id is not the answer\'s next' }
  if (answer.data.length === 0) return { kind: 'malformed', text, why: 'an event without changes' }
  return { kind: 'event', id, event: 'changes', data, answer }
}

/** Splits complete blocks off `pending`; returns them and what is left (an incomplete block). */
export function splitBlocks (pending: string): { blocks: string[], rest: string } {
  const parts = pending.split('\n\n')
  const rest = parts.pop() ?? ''
  return { blocks: parts, rest }
}

/**
 * A GET read off the wire with node:http, on a connection of its own: for an event stream, every
 * block as it arrives (events, comments, anything malformed); for any other answer, its body.
 */
export class WireStream {
  status = 0
  headers: IncomingHttpHeaders = {}
  raw = ''
  readonly blocks: Block[] = []
  /** performance.now() of each block's arrival, by index. */
  readonly arrivals: number[] = []
  /** 'end' when the response ended cleanly, 'close' when the connection went first. */
  finish: 'end' | 'close' | undefined
  private rest = ''
  private readonly waiters = new Set<() => void>()
  private req!: ClientRequest
  readonly done: Promise<'end' | 'close'>
  private resolveDone!: (how: 'end' | 'close') => void

  private constructor () {
    this.done = new Promise((resolve) => { this.resolveDone = resolve })
  }

  /** `localAddress`: the loopback address to connect from (the client address the server sees), e.g. 127.0.0.2. */
  static async open (url: string, headers: Record<string, string> = {}, options: { localAddress?: string } = {}): Promise<WireStream> {
    const stream = new WireStream()
    await new Promise<void>((resolve, reject) => {
      stream.req = httpRequest(url, { agent: false, localAddress: options.localAddress, headers: { accept: 'text/event-stream', ...headers } }, (res: IncomingMessage) => {
        stream.status = res.statusCode ?? 0
        stream.headers = res.headers
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => stream.receive(chunk))
        res.on('end', () => stream.end('end'))
        res.on('error', () => {})
        res.on('close', () => stream.end('close'))
        resolve()
      })
      stream.req.on('error', (err) => { reject(err); stream.end('close') })
      stream.req.end()
    })
    return stream
  }

  get events (): Array<Extract<Block, { kind: 'event' }>> {
    return this.blocks.filter((b): b is Extract<Block, { kind: 'event' }> => b.kind === 'event')
  }

  get comments (): Array<Extract<Block, { kind: 'comment' }>> {
    return this.blocks.filter((b): b is Extract<Block, { kind: 'comment' }> => b.kind === 'comment')
  }

  get malformed (): Array<Extract<Block, { kind: 'malformed' }>> {
    return this.blocks.filter((b): b is Extract<Block, { kind: 'malformed' }> => b.kind === 'malformed')
  }

  /** The text after the last complete block. */
  get incomplete (): string { return this.rest }

  private receive (chunk: string): void {
    this.raw += chunk
    if (!String(this.headers['content-type'] ?? '').startsWith('text/event-stream')) return
    const { blocks, rest } = splitBlocks(this.rest + chunk)
    this.rest = rest
    const now = performance.now()
    for (const block of blocks) {
      this.blocks.push(parseBlock(block))
      this.arrivals.push(now)
    }
    for (const wake of this.waiters) wake()
  }

  private end (how: 'end' | 'close'): void {
    this.finish ??= how
    this.resolveDone(how)
    for (const wake of this.waiters) wake()
  }

  /** Waits until `ready()` holds after some block arrived; fails if the stream ends first or after `ms`. */
  async until (ready: () => boolean, what: string, ms = 20_000): Promise<void> {
    const deadline = performance.now() + ms
    while (!ready()) {
      if (this.finish !== undefined) throw new Error(`the stream ended before ${what}: ${this.raw.slice(-500)}`)
      const left = deadline - performance.now()
      if (left <= 0) throw new Error(`no ${what} within ${ms} ms: ${this.raw.slice(-500)}`)
      await new Promise<void>((resolve) => {
        const wake = (): void => { this.waiters.delete(wake); clearTimeout(timer); resolve() }
        const timer = setTimeout(wake, left)
        this.waiters.add(wake)
      })
    }
  }

  /** Waits until `n` events have arrived; returns the n-th. */
  async event (n: number, ms = 20_000): Promise<Extract<Block, { kind: 'event' }>> {
    await this.until(() => this.events.length >= n, `event ${n}`, ms)
    return this.events[n - 1]!
  }

  /** The whole body of an answer that is not a stream (an error). */
  async text (ms = 20_000): Promise<string> {
    await bounded(this.done, ms)
    return this.raw
  }

  close (): void {
    this.req.destroy()
  }
}

/** A test's streams, closed at teardown (before the app closes) whatever happened. */
export function streams (t: Test): (url: string, headers?: Record<string, string>, options?: { localAddress?: string }) => Promise<WireStream> {
  const opened: WireStream[] = []
  t.teardown(() => { for (const s of opened) s.close() })
  return async (url, headers, options) => {
    const s = await WireStream.open(url, headers, options)
    opened.push(s)
    return s
  }
}

export const MARKER = /#(\d+)$/

/**
 * An offline copy that applies answers in order (upsert by id, delete by id) and notes every step
 * back: an upsert whose content marker (`#<n>` at its end, raised by every write of that row) is
 * older than one applied before, or an upsert of an id after its delete (ids are never reused).
 */
export class LiveCopy {
  readonly copy = new Map<number, SyncMessage>()
  readonly markers = new Map<number, number>()
  readonly deleted = new Set<number>()
  readonly outOfOrder: string[] = []
  answers = 0
  upserts = 0
  deletes = 0
  next: string | undefined

  constructor (readonly name: string) {}

  apply (answer: Answer, where: string): void {
    this.answers++
    for (const entry of answer.data) {
      if (entry.op === 'upsert') {
        const message = entry.message
        if (message === undefined || message.id !== entry.id) throw new Error(`${this.name}: upsert ${entry.id} without its message (${where})`)
        const marker = Number(MARKER.exec(message.content)?.[1] ?? -1)
        const before = this.markers.get(entry.id)
        if (before !== undefined && marker < before) this.outOfOrder.push(`${where}: ${entry.id} went back from #${before} to #${marker}`)
        if (this.deleted.has(entry.id)) this.outOfOrder.push(`${where}: ${entry.id} upserted after its delete`)
        this.markers.set(entry.id, Math.max(marker, before ?? marker))
        this.copy.set(entry.id, message)
        this.upserts++
      } else if (entry.op === 'delete') {
        this.copy.delete(entry.id)
        this.deleted.add(entry.id)
        this.deletes++
      } else {
        throw new Error(`${this.name}: op ${String((entry as { op: unknown }).op)} (${where})`)
      }
    }
    this.next = answer.next
  }

  sorted (): SyncMessage[] {
    return [...this.copy.values()].sort((a, b) => a.id - b.id)
  }
}
