import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { setImmediate } from 'node:timers/promises'
import { DrainingError, LiveClientLimitError, LiveFullError } from '../../errors.js'
import { resourcePolicyFor } from '../../http/resource-policy.js'
import { LIVE_UNSENT_BYTES } from '../../memory/budget.js'
import type { ChangesAnswer, ChangeFeed } from '../feed.js'
import { ANSWER_ROOM_BYTES, EVENT_STREAM_HEADERS, EventStream, frameEvent, frameKeepAlive } from './event-stream.js'
import type { FailureReport } from './failure-streak.js'
import { createLiveHub, FAN_OUT_SLICE, type Group, type Placement } from './hub.js'
import { HeldPoll } from './long-poll.js'
import { createLiveSlots } from './slots.js'
import { connectionKey, unacknowledgedBytes, type Asked } from './unacknowledged.js'
import { UnsentBytes } from './unsent-bytes.js'

// Live delivery of the change feed (CONTRACT 13): a long-poll held until its position can be answered,
// and Server-Sent Events that follow the feed. Both start with the answer a poll would get, from the
// same repository; what they wait for is the hub's (hub.ts), so a held client costs the database
// nothing of its own. What streams hold unsent is shared fairly among client addresses (CONTRACT 16,
// unsent-bytes.ts): a stream answers its headers once admitted, and its events wait for room.

export interface LiveOptions {
  /** LIVE_MAX_CONNECTIONS: held long-polls and open streams of this instance; 0 turns live delivery off. */
  maxConnections: number
  /** LIVE_MAX_PER_CLIENT: the same, per client address. */
  maxPerClient: number
  /** LIVE_MAX_BUFFER_BYTES: a stream's next event is written only once less than this waits unsent. */
  maxBufferBytes: number
  /** LIVE_HEARTBEAT_S: seconds without an event before a keep-alive. */
  heartbeatS: number
  /** LIVE_STALL_S: seconds a stream's client may read nothing it was sent before the stream is closed. */
  stallS: number
  /** LIVE_WATCH_MS: how often the watcher reads the head while clients wait. */
  watchMs: number
  /** SHUTDOWN_GRACE_MS: on SIGTERM, streams get half of it to pass on their last event. */
  shutdownGraceMs: number
  /** What streams may hold unsent together, shared among client addresses (default LIVE_UNSENT_BYTES). */
  unsentBytes?: number
  /** Whether the system's own send queues are read to tell a client that stopped reading (default true where they exist). */
  systemQueues?: boolean
}

export interface LiveHooks {
  /** Reads of the feed failed, or came back after failing: once per streak. */
  failures: FailureReport
  /** An answer was written to every client waiting for it, this long (seconds) after it became answerable. */
  delivered: (delaySeconds: number) => void
}

export interface LiveRequest {
  since: string | undefined
  limit: number
  /** Seconds a long-poll may be held (0: answer at once). */
  wait: number
  /** The client address, as TRUST_PROXY resolves it. */
  address: string
}

/**
 * One live request's response, as the route hands it over: the framework's reply stays above.
 * `takeOver` takes the response from the framework, to be written here, and gives the headers
 * already set on it (security, CORS, request id).
 */
export interface LiveConnection {
  response: ServerResponse
  takeOver: () => Record<string, string | number | string[] | undefined>
}

/** The client's connection is gone: nothing written to it arrives, and its 'close' has been emitted. */
const isClosed = (response: ServerResponse): boolean => response.socket === null || response.socket.destroyed

/** Runs `done` once the response closes, or now if its connection is already gone. */
function whenClosed (response: ServerResponse, done: () => void): void {
  if (isClosed(response)) done()
  else response.once('close', done)
}

/** How often the sweep writes keep-alives and looks for streams whose clients stopped reading. */
const SWEEP_MS = 1_000
/**
 * How often the system's send queues are read: a quarter of LIVE_STALL_S, at least every 15 s (so a
 * stalled client is closed by LIVE_STALL_S and 15 s at the latest) and at most every 250 ms. With many
 * streams a read is megabytes of text (docs/performance.md#live-delivery), scanned for this instance's
 * ports only.
 */
const SYSTEM_QUEUES_MIN_MS = 250
const SYSTEM_QUEUES_MAX_MS = 15_000

/** What the system said of a stream's connection when its client last acknowledged something. */
interface Acknowledged { bytes: number, at: number }

/** The streams' sockets, as the system's tables are asked about them. */
function askedOf (streams: Iterable<EventStream>): Asked {
  const localPorts = new Set<number>()
  let ipv4 = false
  let ipv6 = false
  for (const stream of streams) {
    const socket = stream.response.socket
    if (socket?.localPort === undefined) continue
    localPorts.add(socket.localPort)
    if (socket.localAddress?.includes(':') === true) ipv6 = true
    else ipv4 = true
  }
  return { localPorts, ipv4, ipv6 }
}

export function createLiveDelivery (feed: ChangeFeed, options: LiveOptions, hooks: LiveHooks) {
  // An address holding up to one stream's most (its pacing bound and one answer) is never held back by another's.
  const unsent = new UnsentBytes({ limit: options.unsentBytes ?? LIVE_UNSENT_BYTES, light: options.maxBufferBytes + ANSWER_ROOM_BYTES, answer: ANSWER_ROOM_BYTES })
  const hub = createLiveHub({ feed, watchMs: options.watchMs, frame: frameEvent, delivered: hooks.delivered, failures: hooks.failures })
  const slots = createLiveSlots(options.maxConnections, options.maxPerClient)
  const streams = new Set<EventStream>()
  const polls = new Map<HeldPoll, () => void>()
  const acknowledged = new WeakMap<EventStream, Acknowledged>()
  let closing = false
  let sweeping = false
  let stalled = 0

  const heartbeatMs = options.heartbeatS * 1000
  const stallMs = options.stallS * 1000
  const systemQueuesMs = Math.min(SYSTEM_QUEUES_MAX_MS, Math.max(SYSTEM_QUEUES_MIN_MS, stallMs / 4))
  let systemQueuesAt = 0
  let systemQueues = options.systemQueues ?? true

  function cutStalled (stream: EventStream): void {
    stream.cut()
    stalled++
  }

  /**
   * A stream's client acknowledged nothing for LIVE_STALL_S while the system held bytes for it: a
   * backgrounded phone with a zero receive window, whose keep-alives still leave the process.
   */
  function judgeBySystem (stream: EventStream, queued: number | undefined, now: number): void {
    const socket = stream.response.socket
    if (queued === undefined || socket === null) return
    const bytes = stream.passedOn - queued
    const last = acknowledged.get(stream)
    if (queued === 0 || last === undefined || bytes > last.bytes) acknowledged.set(stream, { bytes, at: now })
    else if (now - last.at >= stallMs) cutStalled(stream)
  }

  // Keep-alives for quiet streams, with their position as the id; streams whose clients stopped
  // reading are closed. In slices, like the fan-out: with many streams one pass is too long a block
  // (docs/performance.md#live-delivery).
  async function sweep (): Promise<void> {
    if (sweeping) return
    sweeping = true
    try {
      const now = performance.now()
      let queues: Map<string, number> | undefined
      if (systemQueues && stallMs > 0 && now - systemQueuesAt >= systemQueuesMs && streams.size > 0) {
        systemQueuesAt = now
        queues = await unacknowledgedBytes(askedOf(streams))
        if (queues === undefined) systemQueues = false
      }
      const quietSince = performance.now() - heartbeatMs
      const keepAlives = new Map<Group | undefined, Buffer>()
      const keepAliveOf = (group: Group | undefined): Buffer => {
        let framed = keepAlives.get(group)
        if (framed === undefined) {
          const { epoch, position } = group ?? {}
          framed = frameKeepAlive(group !== undefined && epoch !== undefined && position !== undefined ? feed.tokenAt(epoch, position, group.point) : undefined)
          keepAlives.set(group, framed)
        }
        return framed
      }
      let i = 0
      for (const stream of [...streams]) {
        if (i++ > 0 && i % FAN_OUT_SLICE === 0) {
          await setImmediate()
          if (closing) return
        }
        if (!stream.open) continue
        const at = performance.now()
        if (stallMs > 0 && stream.stalledFor(at) >= stallMs) {
          cutStalled(stream)
          continue
        }
        if (queues !== undefined) {
          const socket = stream.response.socket
          judgeBySystem(stream, queues.get(connectionKey(socket?.localPort, socket?.remotePort)), at)
          if (!stream.open) continue
        }
        // A stream still sending what it was given is not quiet; it is only waiting for its client.
        if (stream.lastWrite <= quietSince && stream.unsent === 0) stream.keepAlive(keepAliveOf(stream.group))
      }
    } finally {
      sweeping = false
    }
  }
  const sweeper = setInterval(() => { sweep().catch(hooks.failures.failed.bind(undefined, 'sweep')) }, Math.min(SWEEP_MS, heartbeatMs))
  sweeper.unref()

  /**
   * Takes a live slot for the client, or refuses it: 503 when the instance is full or stopping, 429
   * when the client holds its share (the error handler adds Retry-After to each).
   */
  function admit (address: string): void {
    const refused = closing ? 'closing' : slots.take(address)
    if (refused === undefined) return
    if (refused === 'client') throw new LiveClientLimitError()
    throw refused === 'closing' ? new DrainingError() : new LiveFullError()
  }

  /** Holds a long-poll that found nothing to answer until its position can be, `wait` ends, or the client leaves. */
  function hold (response: ServerResponse, request: LiveRequest, first: ChangesAnswer): Promise<Buffer> {
    admit(request.address)
    return new Promise<Buffer>((resolve, reject) => {
      let settled = false
      const settle = (result: ChangesAnswer | Error): void => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        response.off('close', left)
        hub.leave(poll)
        polls.delete(poll)
        slots.release(request.address)
        if (result instanceof Error) reject(result)
        else resolve(result.body)
      }
      // Nothing came: the answer says so, standing where the hub has moved the client's position.
      const nothing = (): void => { settle(feed.nothingAt(poll.group?.epoch ?? first.epoch, poll.group?.position ?? first.next, poll.group?.point ?? first.point)) }
      const left = (): void => { nothing() }
      const poll = new HeldPoll(settle)
      const timer = setTimeout(nothing, request.wait * 1000)
      whenClosed(response, left)
      polls.set(poll, nothing)
      hub.place(poll, { epoch: first.epoch, position: first.next, limit: request.limit, catchingUp: false, point: first.point })
    })
  }

  return {
    /** The answer to a poll, held while `wait` allows and nothing can be answered yet. */
    async poll (response: ServerResponse, request: LiveRequest): Promise<Buffer> {
      const first = await feed.answerFor(request.since, request.limit)
      // An initial copy never waits (CONTRACT 13), nor does an answer that has something to say.
      // Nor is a client that already left held.
      if (request.since === undefined || request.wait <= 0 || !first.empty || first.hasMore || closing || isClosed(response)) return first.body
      return await hold(response, request, first)
    },

    /**
     * Opens a stream at the client's position. A malformed or expired token is answered as JSON
     * before anything is streamed; after that the headers at once, whatever the streams hold, then
     * one event per answer with changes, each once there is room for it (CONTRACT 16).
     */
    async stream (connection: LiveConnection, request: LiveRequest): Promise<void> {
      admit(request.address)
      const response = connection.response
      const opened: { stream?: EventStream } = {}
      // The slot is given back when the response closes, however it ends: an error answered as JSON,
      // the client leaving (even while its token is checked), the stream ended or cut off.
      whenClosed(response, () => {
        slots.release(request.address)
        if (opened.stream === undefined) return
        streams.delete(opened.stream)
        hub.leave(opened.stream)
        opened.stream.closed()
      })
      const start = await feed.startFor(request.since)
      const set = connection.takeOver()
      if (isClosed(response)) return
      // The headers every response gets (security, CORS, request id) were set as the request arrived.
      // Never compressed: a compressor per stream would hold back events until it flushes, and
      // would cost more memory than the connection itself.
      const headers: OutgoingHttpHeaders = {}
      for (const [name, value] of Object.entries(set)) if (value !== undefined) headers[name] = value
      Object.assign(headers, EVENT_STREAM_HEADERS)
      const policy = resourcePolicyFor(headers['access-control-allow-origin'])
      if (policy !== undefined) headers['cross-origin-resource-policy'] = policy
      response.writeHead(200, headers)
      response.flushHeaders()
      const stream = new EventStream(response, { maxBufferBytes: options.maxBufferBytes, unsent, address: request.address })
      opened.stream = stream
      streams.add(stream)
      if (closing) {
        stream.end()
        return
      }
      // Its first answer is read by the hub like any other, shared with every stream starting there,
      // once the stream has room for it.
      const at: Placement = { ...start, limit: request.limit, catchingUp: true }
      stream.whenReady(() => { hub.place(stream, at) }, true)
    },

    /** A write through this instance committed. */
    poke: () => { hub.poke() },

    stats () {
      let paced = 0
      let waiting = 0
      for (const stream of streams) {
        if (stream.paced) paced++
        if (stream.waiting) waiting++
      }
      return {
        ...hub.stats(),
        heldPolls: polls.size,
        openStreams: streams.size,
        pacedStreams: paced,
        waitingStreams: waiting,
        stalledStreams: stalled,
        unsentBytes: unsent.held,
        unsentHighest: unsent.highest,
        unsentAddresses: unsent.addresses
      }
    },

    /**
     * SIGTERM: held long-polls are answered now, streams end after their last complete event. A
     * stream whose client does not take that event within half the grace is closed, so one stalled
     * phone never holds the instance past SHUTDOWN_GRACE_MS; it resumes from its last complete event.
     */
    close (): void {
      if (closing) return
      closing = true
      for (const answerNow of [...polls.values()]) answerNow()
      for (const stream of [...streams]) stream.end()
      hub.close()
      clearInterval(sweeper)
      const left = [...streams].filter((stream) => stream.open || !isClosed(stream.response))
      if (left.length === 0) return
      const cutOff = setTimeout(() => { for (const stream of left) stream.cut() }, options.shutdownGraceMs / 2)
      Promise.all(left.map(async (stream) => await new Promise<void>((resolve) => { whenClosed(stream.response, resolve) })))
        .then(() => { clearTimeout(cutOff) }, () => {})
    }
  }
}

export type LiveDelivery = ReturnType<typeof createLiveDelivery>
