import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { FastifyReply } from 'fastify'
import { DrainingError, LiveFullError, TooManyRequestsError } from '../../errors.js'
import { resourcePolicyFor } from '../../http/resource-policy.js'
import type { ChangesAnswer, MessageChangesRepository } from '../changes.js'
import { EVENT_STREAM_HEADERS, EventStream, frameEvent, KEEP_ALIVE } from './event-stream.js'
import { createLiveHub } from './hub.js'
import { HeldPoll } from './long-poll.js'
import { createLiveSlots } from './slots.js'

// Live delivery of the change feed (CONTRACT 13): a long-poll held until its position can be answered,
// and Server-Sent Events that follow the feed. Both start with the answer a poll would get, from the
// same repository; what they wait for is the hub's (hub.ts), so a held client costs the database
// nothing of its own.

export interface LiveOptions {
  /** LIVE_MAX_CONNECTIONS: held long-polls and open streams of this instance; 0 turns live delivery off. */
  maxConnections: number
  /** LIVE_MAX_PER_CLIENT: the same, per client address. */
  maxPerClient: number
  /** LIVE_MAX_BUFFER_BYTES: unsent bytes at which a stream is closed. */
  maxBufferBytes: number
  /** LIVE_HEARTBEAT_S: seconds without an event before a keep-alive comment. */
  heartbeatS: number
  /** LIVE_WATCH_MS: how often the watcher reads the head while clients wait. */
  watchMs: number
}

export interface LiveHooks {
  onError: (err: unknown) => void
  /** An answer was written to every client waiting for it, this long (seconds) after it became answerable. */
  delivered: (delaySeconds: number) => void
}

export interface ChangesRequest {
  since: string | undefined
  limit: number
  /** Seconds a long-poll may be held (0: answer at once). */
  wait: number
  /** The client address, as TRUST_PROXY resolves it. */
  address: string
}

/** The client's connection is gone: nothing written to it arrives, and its 'close' has been emitted. */
const isClosed = (response: ServerResponse): boolean => response.socket === null || response.socket.destroyed

/** Runs `done` once the response closes, or now if its connection is already gone. */
function whenClosed (response: ServerResponse, done: () => void): void {
  if (isClosed(response)) done()
  else response.once('close', done)
}

/** Seconds a client waits before trying again when a limit refuses it. */
const RETRY_AFTER_SECONDS = '1'
/** How often the keep-alive sweep looks for streams that have been quiet for a heartbeat. */
const SWEEP_MS = 1_000

export function createLiveDelivery (feed: MessageChangesRepository, options: LiveOptions, hooks: LiveHooks) {
  const hub = createLiveHub({ feed, watchMs: options.watchMs, frame: frameEvent, delivered: hooks.delivered, onError: hooks.onError })
  const slots = createLiveSlots(options.maxConnections, options.maxPerClient)
  const streams = new Set<EventStream>()
  const polls = new Map<HeldPoll, () => void>()
  let closing = false

  const heartbeatMs = options.heartbeatS * 1000
  const sweep = setInterval(() => {
    const quietSince = performance.now() - heartbeatMs
    for (const stream of streams) if (stream.lastWrite <= quietSince) stream.write(KEEP_ALIVE)
  }, Math.min(SWEEP_MS, heartbeatMs))
  sweep.unref()

  /** Takes a live slot for the client, or refuses it: 503 when the instance is full or stopping, 429 when the client holds its share. */
  function admit (reply: FastifyReply, address: string): void {
    const refused = closing ? 'closing' : slots.take(address)
    if (refused === undefined) return
    reply.header('retry-after', RETRY_AFTER_SECONDS)
    if (refused === 'client') throw new TooManyRequestsError()
    throw refused === 'closing' ? new DrainingError() : new LiveFullError()
  }

  /** Holds a long-poll that found nothing to answer until its position can be, `wait` ends, or the client leaves. */
  function hold (reply: FastifyReply, request: ChangesRequest, first: ChangesAnswer): Promise<Buffer> {
    admit(reply, request.address)
    return new Promise<Buffer>((resolve, reject) => {
      let settled = false
      const settle = (result: ChangesAnswer | Error): void => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        reply.raw.off('close', left)
        hub.leave(poll)
        polls.delete(poll)
        slots.release(request.address)
        if (result instanceof Error) reject(result)
        else resolve(result.body)
      }
      // Nothing came: the answer says so, standing where the hub has moved the client's position.
      const nothing = (): void => { settle(feed.nothingAt(poll.group?.epoch ?? first.epoch, poll.group?.position ?? first.next, poll.group?.read ?? first.read)) }
      const left = (): void => { nothing() }
      const poll = new HeldPoll(settle)
      const timer = setTimeout(nothing, request.wait * 1000)
      whenClosed(reply.raw, left)
      polls.set(poll, nothing)
      hub.place(poll, first.epoch, first.next, request.limit, false, first.read)
    })
  }

  return {
    /** The answer to a poll, held while `wait` allows and nothing can be answered yet. */
    async poll (reply: FastifyReply, request: ChangesRequest): Promise<Buffer> {
      const first = await feed.read(request.since, request.limit)
      // An initial copy never waits (CONTRACT 13), nor does an answer that has something to say.
      // Nor is a client that already left held.
      if (request.since === undefined || request.wait <= 0 || !first.empty || first.hasMore || closing || isClosed(reply.raw)) return first.body
      return await hold(reply, request, first)
    },

    /**
     * Opens a stream at the client's position. A malformed or expired token is answered as JSON
     * before anything is streamed; after that, one event per answer with changes.
     */
    async stream (reply: FastifyReply, request: ChangesRequest): Promise<void> {
      admit(reply, request.address)
      const response = reply.raw
      const opened: { stream?: EventStream } = {}
      // The slot is given back when the response closes, however it ends: an error answered as JSON,
      // the client leaving (even while its first answer is read), the stream ended or cut off.
      whenClosed(response, () => {
        slots.release(request.address)
        if (opened.stream === undefined) return
        streams.delete(opened.stream)
        hub.leave(opened.stream)
      })
      const first = await feed.read(request.since, request.limit)
      reply.hijack()
      if (isClosed(response)) return
      // The headers every response gets (security, CORS, request id) were set as the request arrived.
      // Never compressed: a compressor per stream would hold back events until it flushes, and
      // would cost more memory than the connection itself.
      const headers: OutgoingHttpHeaders = {}
      for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) headers[name] = value
      Object.assign(headers, EVENT_STREAM_HEADERS)
      const policy = resourcePolicyFor(headers['access-control-allow-origin'])
      if (policy !== undefined) headers['cross-origin-resource-policy'] = policy
      response.writeHead(200, headers)
      response.flushHeaders()
      const stream = new EventStream(response, { maxBufferBytes: options.maxBufferBytes })
      opened.stream = stream
      streams.add(stream)
      if (closing) {
        stream.end()
        return
      }
      if (!first.empty) stream.write(frameEvent(first))
      hub.place(stream, first.epoch, first.next, request.limit, first.hasMore, first.read)
    },

    /** A write through this instance committed. */
    poke: () => { hub.poke() },

    stats: () => ({ ...hub.stats(), heldPolls: polls.size, openStreams: streams.size }),

    /** SIGTERM: held long-polls are answered now, streams end after their last complete event. */
    close (): void {
      if (closing) return
      closing = true
      for (const answerNow of [...polls.values()]) answerNow()
      for (const stream of [...streams]) stream.end()
      hub.close()
      clearInterval(sweep)
    }
  }
}

export type LiveDelivery = ReturnType<typeof createLiveDelivery>
