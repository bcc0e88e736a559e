import type { ServerResponse } from 'node:http'
import type { ChangesAnswer } from '../changes.js'
import type { Group, Waiter } from './hub.js'
import { liveSpan } from '../../tracing/live-span.js'

// Server-Sent Events framing (CONTRACT 13), written here rather than with @fastify/sse: that plugin
// formats and serialises every message again for every client, and keeps a timer per connection for
// its heartbeats. Here an answer is framed once and the same bytes go to every stream waiting at its
// position; one sweep per instance writes the keep-alives. The format is a few lines: `id`, `event`
// and one `data` line (the answer's JSON has no line breaks), then a blank line.

const EVENT_TAIL = Buffer.from('\n\n')
const CRLF = Buffer.from('\r\n')

// Events go to the socket as whole HTTP/1.1 chunks, framed once: a write through the response would
// frame every event again for every client, in four socket writes (size, CRLF, data, CRLF). Measured
// at 1,000 streams (docs/benchmarks.md), the write was the cost of fanning an event out.
function chunk (bytes: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, CRLF])
}

/** The bytes of a chunk, for a client without chunked transfer coding (HTTP/1.0, where the body ends with the connection). */
function unchunk (framed: Buffer): Buffer {
  return framed.subarray(framed.indexOf(CRLF) + 2, framed.length - 2)
}

/** An answer as one event, framed as a chunk: `id` is the answer's `next`, so a reconnecting client resumes after it. */
export function frameEvent (answer: ChangesAnswer): Buffer {
  return chunk(Buffer.concat([Buffer.from(`id: ${answer.token}\nevent: changes\ndata: `), answer.body, EVENT_TAIL]))
}

export const KEEP_ALIVE = chunk(Buffer.from(': keep-alive\n\n'))

export const EVENT_STREAM_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-store' }

export interface EventStreamOptions {
  /** Unsent bytes at which a client that stopped reading is cut off (LIVE_MAX_BUFFER_BYTES). */
  maxBufferBytes: number
}

/** An open stream: writes whole events, and cuts the client off when too many wait unsent. */
export class EventStream implements Waiter {
  readonly follows = true
  group: Group | undefined = undefined
  /** performance.now() of the last write, for the keep-alive sweep. */
  lastWrite = performance.now()
  #open = true
  // Tracing (CONTRACT 15): made while the request is handled; its span counts the events written.
  readonly #span = liveSpan('stream')

  constructor (readonly response: ServerResponse, private readonly options: EventStreamOptions) {}

  get open (): boolean {
    return this.#open && !this.response.destroyed
  }

  answer (_answer: ChangesAnswer, event: () => Buffer): boolean {
    return this.write(event())
  }

  /** Writes a whole event (framed by frameEvent); false when the stream is closed, or is closed now for falling behind. */
  write (framed: Buffer): boolean {
    const socket = this.response.socket
    if (!this.open || socket === null) return false
    // The response's own end() still closes the chunked body ('0' chunk), since it framed the head.
    socket.write(this.response.chunkedEncoding ? framed : unchunk(framed))
    this.lastWrite = performance.now()
    if (framed !== KEEP_ALIVE) this.#span.delivered()
    // A client that stops reading would make the server hold every event for it. It resumes from
    // its last event id, on any instance, and loses nothing.
    if (socket.writableLength > this.options.maxBufferBytes) {
      this.#open = false
      this.response.destroy()
      return false
    }
    return true
  }

  /** The log no longer holds what this stream needs: end it; reconnecting, the client gets 410. */
  expired (): void {
    this.end()
  }

  /** Ends the stream after its last complete event. */
  end (): void {
    if (!this.#open) return
    this.#open = false
    this.response.end()
  }
}
