import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { ANSWER_MAX_BYTES, type ChangesAnswer } from '../feed.js'
import type { Delivered, Group, Waiter } from './hub.js'
import type { Account, Room, UnsentBytes } from './unsent-bytes.js'
import { liveSpan } from '../../tracing/live-span.js'

// Server-Sent Events framing (CONTRACT 13), written here rather than with @fastify/sse: that plugin
// formats and serialises every message again for every client, and keeps a timer per connection for
// its heartbeats. Here an answer is framed once and the same bytes go to every stream waiting at its
// position; one sweep per instance writes the keep-alives. The format is a few lines: `id`, `event`
// and one `data` line (the answer's JSON has no line breaks), then a blank line.

const CRLF = Buffer.from('\r\n')
// The blank line that ends an event, and the end of its chunk.
const EVENT_TAIL = Buffer.from('\n\n\r\n')

// Events go to the socket as whole HTTP/1.1 chunks, framed once: a write through the response would
// frame every event again for every client, in four socket writes (size, CRLF, data, CRLF), and the
// write was the cost of fanning an event out (docs/performance.md#live-delivery).
function chunk (bytes: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, CRLF])
}

/** The bytes of a chunk, for a client without chunked transfer coding (HTTP/1.0, where the body ends with the connection). */
function unchunk (framed: Buffer): Buffer {
  return framed.subarray(framed.indexOf(CRLF) + 2, framed.length - 2)
}

/**
 * An answer as one event, framed as a chunk, in one copy of its body: `id` is the answer's `next`, so a
 * reconnecting client resumes after it.
 */
export function frameEvent (answer: ChangesAnswer): Buffer {
  const head = `id: ${answer.token}\nevent: changes\ndata: `
  const size = Buffer.byteLength(head) + answer.body.length + 2
  return Buffer.concat([Buffer.from(`${size.toString(16)}\r\n${head}`), answer.body, EVENT_TAIL])
}

/**
 * A keep-alive: a comment, and the stream's position as an `id` line. A block with an id and no data
 * fires no event, but sets the client's last event id (WHATWG, "dispatch the event"), so a client
 * that saw no change for weeks reconnects from a recent token, not one past SYNC_RETENTION_HOURS.
 */
export function frameKeepAlive (token: string | undefined): Buffer {
  return chunk(Buffer.from(token === undefined ? ': keep-alive\n\n' : `: keep-alive\nid: ${token}\n\n`))
}

export const EVENT_STREAM_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-store' }

/**
 * The room a stream takes for its next answer before it is read: ANSWER_MAX_BYTES, the entry that
 * crosses it (the cut lets it in; 4,000 characters however escaped, and the rest of its message) and
 * the event's framing. An answer larger still (rows written by SQL past the API's limits, text that
 * escapes into six bytes a character) takes what it lacks when it is written, or waits for room for
 * all of it.
 */
export const ANSWER_ROOM_BYTES = ANSWER_MAX_BYTES + 65_536

/**
 * Bytes handed to the socket at a time. Node counts a chunk in full until all of it is written, and
 * reports nothing of it before: slices tell, as the client reads, how much still waits, and that it
 * moves. A client reading 1 KB a second still takes one within LIVE_STALL_S; fewer, larger writes cost
 * less than 16 KiB ones (the socket's own high-water mark) when clients read fast.
 */
const SLICE_BYTES = 65_536

export interface EventStreamOptions {
  /** LIVE_MAX_BUFFER_BYTES: the next event is written only once less than this waits unsent. */
  maxBufferBytes: number
  /** What every stream holds, together, shared among client addresses. */
  unsent: UnsentBytes
  /** The client address what it holds is counted against (as TRUST_PROXY resolves it). */
  address: string
}

/**
 * An open stream, paced by its client (CONTRACT 13): an event is written whole, in slices as the
 * socket takes them, and the stream asks for the next only once less than LIVE_MAX_BUFFER_BYTES of
 * what it wrote still waits unsent. A client that keeps reading, however slowly, is never cut off;
 * one that reads nothing for LIVE_STALL_S is (stalledFor, by the delivery's sweep).
 *
 * Nothing is written without room for it among what its client's address may hold (CONTRACT 16,
 * unsent-bytes.ts): before an answer is read for it (whenReady with `due`), or when an answer read
 * for every stream waiting at a position comes (answer: 'deferred' when there is none).
 *
 * No write carries a callback: the socket's 'drain' (the socket had a slice or more waiting, and has
 * passed it all on) hands it the next slice and tells a paced stream it may go on. The common event,
 * small and taken by the system at once, costs one socket write.
 */
export class EventStream implements Waiter {
  readonly follows = true
  group: Group | undefined = undefined
  /** performance.now() of the last write, for the keep-alive sweep. */
  lastWrite = performance.now()
  #open = true
  #ending = false
  /** Buffers still to be handed to the socket, the first from #offset on; more than the socket takes at a time. */
  readonly #queue: Buffer[] = []
  #offset = 0
  #queued = 0
  /** Bytes handed to the socket so far, and as many as the sweep last saw passed on. */
  #handed = 0
  #passedAtSweep = 0
  /** Since when something waits unsent with nothing passed on, as the sweeps saw it. */
  #waitingSince: number | undefined
  #onReady: (() => void) | undefined
  /** What #onReady waits for besides its client: room for the answer it goes on to read. */
  #due = false
  /** Room taken for its next answer, and the request for it while it waits. */
  #room: Room | undefined
  #asking: (() => void) | undefined
  /** What that room is asked for: one answer, or as much as the last answer it had no room for. */
  #roomWanted = ANSWER_ROOM_BYTES
  readonly #drained = (): void => { this.#progress() }
  /** Its unsent bytes as the shared count last counted them, against its client's address. */
  readonly #account: Account
  // Tracing (CONTRACT 15): made while the request is handled; its span counts the events written.
  readonly #span = liveSpan('stream')

  /** The connection, kept from the start: the response lets go of it when it ends. */
  readonly #socket: Socket | null

  constructor (readonly response: ServerResponse, private readonly options: EventStreamOptions) {
    this.#socket = response.socket
    this.#account = { address: options.address, counted: 0 }
    this.#socket?.on('drain', this.#drained)
  }

  get open (): boolean {
    return this.#open && !this.response.destroyed
  }

  /** Bytes written to the stream that the socket has not passed on to the system yet. */
  get unsent (): number {
    return this.#queued + (this.#socket?.writableLength ?? 0)
  }

  /** Bytes the socket has passed on to the system: with the system's own queue, what the client acknowledged. */
  get passedOn (): number {
    return this.#handed - (this.#socket?.writableLength ?? 0)
  }

  /**
   * Writes an answer's event (framed once for every stream at its position), counted as a delivery:
   * 'gone' when the stream is closed; 'deferred', nothing written, when there is no room for it;
   * 'paced' when its client must read, or room be found for the next answer of a copy or catch-up
   * (hasMore), before it gets another; else 'ready'.
   */
  answer (answer: ChangesAnswer, event: () => Buffer): Delivered {
    if (!this.#writable()) return 'gone'
    const bytes = this.#onWire(event())
    const room = this.#roomFor(bytes.length)
    if (room === undefined) return 'deferred'
    this.#send(bytes, room)
    this.#roomWanted = ANSWER_ROOM_BYTES
    this.#span.delivered()
    if (this.unsent >= this.options.maxBufferBytes) return 'paced'
    // Room for the next now, if it is there: the stream then stays with the others at its position.
    if (answer.hasMore) this.#room = this.options.unsent.take(this.options.address, ANSWER_ROOM_BYTES)
    return answer.hasMore && this.#room === undefined ? 'paced' : 'ready'
  }

  /** Caught up with nothing to say: the room it took for the answer that said so goes back. */
  idle (): void {
    if (this.#room !== undefined) this.options.unsent.release(this.#room)
    this.#room = undefined
  }

  /** Writes a keep-alive, unless even its few bytes find no room (the next sweep tries again). */
  keepAlive (framed: Buffer): boolean {
    if (!this.#writable()) return false
    const bytes = this.#onWire(framed)
    const room = this.options.unsent.take(this.options.address, bytes.length, true)
    if (room === undefined) return false
    this.#send(bytes, room)
    return true
  }

  /**
   * Paced, or between answers: `resume` runs once less than LIVE_MAX_BUFFER_BYTES waits unsent and,
   * when `due` (an answer is to be read for it at once), it holds room for that answer; never if the
   * stream closes first. Its client reading is told by the socket's 'drain', or by the next sweep when
   * less than the socket's high-water mark waited.
   */
  whenReady (resume: () => void, due: boolean): void {
    this.#onReady = resume
    this.#due = due
    this.#progress()
  }

  /** Waiting for its client to read before it gets its next answer. */
  get paced (): boolean {
    return this.#onReady !== undefined && this.#asking === undefined
  }

  /** Waiting for room for its next answer among what its address may hold. */
  get waiting (): boolean {
    return this.#asking !== undefined
  }

  /**
   * The sweep's look at the stream: how long something has waited unsent with nothing passed on to
   * the system since (0 while nothing waits, or bytes move). Also brings its share of the shared count
   * up to date, and lets a paced stream go on, where no 'drain' would.
   */
  stalledFor (now: number): number {
    this.#progress()
    const unsent = this.unsent
    const passed = this.passedOn
    if (unsent === 0 || passed > this.#passedAtSweep) {
      this.#passedAtSweep = passed
      this.#waitingSince = unsent === 0 ? undefined : now
      return 0
    }
    this.#waitingSince ??= now
    return now - this.#waitingSince
  }

  /** The log no longer holds what this stream needs: end it; reconnecting, the client gets 410. */
  expired (): void {
    this.end()
  }

  /** Ends the stream after its last complete event, once the socket has taken it. */
  end (): void {
    if (!this.#open || this.#ending) return
    this.#ending = true
    this.#pump()
  }

  /** Closes the connection now: a client that stopped reading, or one that holds a shutdown past its bound. */
  cut (): void {
    if (this.response.destroyed) return
    this.#open = false
    this.response.destroy()
    this.closed()
  }

  /** The response closed, however: what it held is no longer anyone's. */
  closed (): void {
    this.#open = false
    this.#onReady = undefined
    this.#queue.length = 0
    this.#queued = 0
    this.#socket?.off('drain', this.#drained)
    this.#asking?.()
    this.#asking = undefined
    if (this.#room !== undefined) this.options.unsent.release(this.#room)
    this.#room = undefined
    this.#report(0)
  }

  #writable (): boolean {
    const socket = this.#socket
    return this.#open && !this.#ending && socket !== null && !socket.destroyed
  }

  #onWire (framed: Buffer): Buffer {
    return this.response.chunkedEncoding ? framed : unchunk(framed)
  }

  /**
   * Room for `bytes`: the room it holds, with what that lacks taken now; undefined, and its room given
   * back, when there is none, and its next request is for all of it. Room of the whole limit writes
   * whatever comes: an answer cannot wait for more than there is.
   */
  #roomFor (bytes: number): Room | undefined {
    const { unsent, address } = this.options
    const held = this.#room
    this.#room = undefined
    if (held !== undefined && (held.bytes >= bytes || held.bytes >= unsent.limit)) return held
    const more = unsent.take(address, bytes - (held?.bytes ?? 0))
    if (more !== undefined && held === undefined) return more
    if (more !== undefined && held !== undefined) {
      held.bytes += more.bytes
      return held
    }
    if (held !== undefined) unsent.release(held)
    this.#roomWanted = bytes
    return undefined
  }

  /** Writes a whole block, its bytes counted out of `room` and what is left of that given back. */
  #send (bytes: Buffer, room: Room): void {
    const socket = this.#socket!
    this.lastWrite = performance.now()
    // The common case, once per client of every event fanned out: a small event the socket takes at once.
    if (this.#queued === 0 && bytes.length <= SLICE_BYTES && socket.writableLength < SLICE_BYTES) {
      this.#handed += bytes.length
      socket.write(bytes)
    } else {
      this.#queue.push(bytes)
      this.#queued += bytes.length
      this.#pump()
    }
    this.#report(this.unsent, room)
    this.options.unsent.release(room)
  }

  /** Asks for room for its next answer, once. */
  #ask (): void {
    if (this.#asking !== undefined) return
    let granted = false
    const cancel = this.options.unsent.ask(this.options.address, this.#roomWanted, (room) => {
      granted = true
      this.#asking = undefined
      this.#room = room
      this.#progress()
    })
    if (!granted) this.#asking = cancel
  }

  #pump (): void {
    const socket = this.#socket
    if (socket === null || !this.open) return
    // A write the system takes at once leaves nothing waiting: the loop goes on while it does. A
    // slice it does not take makes the socket ask for 'drain' (a slice is above its high-water mark).
    while (this.#queue.length > 0 && socket.writableLength < SLICE_BYTES) {
      const head = this.#queue[0]!
      const end = Math.min(head.length, this.#offset + SLICE_BYTES)
      const slice = this.#offset === 0 && end === head.length ? head : head.subarray(this.#offset, end)
      if (end === head.length) {
        this.#queue.shift()
        this.#offset = 0
      } else {
        this.#offset = end
      }
      this.#queued -= slice.length
      this.#handed += slice.length
      socket.write(slice)
    }
    if (this.#ending && this.#queue.length === 0 && this.#open) {
      this.#open = false
      // The response's own end() still closes the chunked body ('0' chunk), since it framed the head.
      this.response.end()
    }
  }

  #progress (): void {
    if (this.#socket === null || this.#socket.destroyed) return
    this.#pump()
    const unsent = this.unsent
    this.#report(unsent)
    if (this.#onReady === undefined || unsent >= this.options.maxBufferBytes) return
    if (this.#due && this.#room === undefined) {
      this.#ask()
      return
    }
    const resume = this.#onReady
    this.#onReady = undefined
    resume()
  }

  /** Brings its share of the shared count up to date; growth is counted out of `from` first. */
  #report (unsent: number, from?: Room): void {
    this.options.unsent.report(this.#account, unsent, from)
  }
}
