import { LIVE_UNSENT_KEPT_FREE_PART } from '../../memory/budget.js'

// What live streams hold for their clients, over all streams (CONTRACT 13, "Limits and faults"), shared
// among client addresses (CONTRACT 16, "Live delivery is shared fairly"). Every byte a stream writes is
// counted against its client's address from before it is written until its client has taken it: a
// stream takes room for an answer before the answer is read (or, for an answer read for streams that
// were waiting with nothing to say, before it is written), and what it writes turns that room into
// its unsent bytes. So the total never passes the limit, however many streams, positions or addresses
// (but for the few bytes of a response's head and of its end, which are written without room).
//
// The share rule. An address holding nothing may take any room that is free. One that holds little (up
// to `light`: what one stream holds at most while it asks for its next answer) may take room while one
// `answer` stays free after it, and one that holds more only while `keptFree` does. So one address,
// however many slow streams it holds, leaves room for the first answers of every other client; many
// addresses holding little together still leave an answer's room for the next client; and a stream of
// an address holding nothing gets room for an answer whenever there is room for it at all. Requests that wait are served by address, the
// address holding least first (round robin among equals), never first come first served over one pile:
// as the room one address's clients free comes back, it goes to the addresses that hold less.

/** Room taken for bytes about to be written: given back, or turned into the stream's unsent bytes as they are written. */
export interface Room {
  readonly address: string
  bytes: number
}

/**
 * What one stream holds unsent, as the ledger last counted it: `report` brings the count to what the
 * stream holds now, so a stream says what it holds, never by how much it changed.
 */
export interface Account {
  readonly address: string
  counted: number
}

interface Request { bytes: number, granted: (room: Room) => void }

/** An address: what its streams hold (unsent, and room taken), and its requests waiting, oldest first. */
interface Holder { readonly address: string, held: number, readonly requests: Request[] }

export interface UnsentBytesOptions {
  /** What streams may hold unsent together (LIVE_UNSENT_BYTES). */
  limit: number
  /** What an address may hold and still take room up to the last `answer`: one stream's steady most, LIVE_MAX_BUFFER_BYTES and one answer. */
  light: number
  /** The room of one answer, which addresses holding little leave free for an address holding nothing. */
  answer: number
}

export class UnsentBytes {
  readonly limit: number
  readonly light: number
  readonly answer: number
  /** What addresses holding more than `light` leave free for the others. */
  readonly keptFree: number
  #held = 0
  #highest = 0
  #waiting = 0
  readonly #holders = new Map<string, Holder>()
  /** Holders with requests waiting, in the order they were last served or began to wait. */
  readonly #asking = new Set<Holder>()

  constructor (options: UnsentBytesOptions) {
    this.limit = options.limit
    this.light = options.light
    this.answer = options.answer
    this.keptFree = Math.max(options.limit / LIVE_UNSENT_KEPT_FREE_PART, options.light)
  }

  /** Bytes held now, over every address: unsent by streams, and room taken for answers being read or written. */
  get held (): number {
    return this.#held
  }

  /** The most ever held at once. */
  get highest (): number {
    return this.#highest
  }

  /** Requests waiting for room. */
  get waiting (): number {
    return this.#waiting
  }

  /** Addresses holding bytes or waiting for room. */
  get addresses (): number {
    return this.#holders.size
  }

  /**
   * Room for `bytes` now, or undefined. `anyShare` (a keep-alive's few bytes): within the limit, and
   * for an address that holds any, short of the last answer's room (its streams have bytes on their
   * way, which keep them alive; many keep-alives would otherwise eat that room away). Otherwise by the share rule, and never ahead of an address that holds
   * less and waits.
   */
  take (address: string, bytes: number, anyShare = false): Room | undefined {
    const holder = this.#holder(address)
    const allowed = anyShare
      ? bytes <= this.limit - this.#held - (holder.held === 0 ? 0 : this.answer)
      : holder.requests.length === 0 && this.#fits(holder, bytes) && this.#first(holder)
    if (allowed) return this.#grant(holder, bytes)
    this.#forget(holder)
    return undefined
  }

  /**
   * Room for `bytes` (at most the limit), given to `granted` now or once there is room and it is this
   * address's turn. Returns the cancel: a stream that closes while it waits asks for nothing.
   */
  ask (address: string, bytes: number, granted: (room: Room) => void): () => void {
    const wanted = Math.min(bytes, this.limit)
    const now = this.take(address, wanted)
    if (now !== undefined) {
      granted(now)
      return () => {}
    }
    const holder = this.#holder(address)
    const request: Request = { bytes: wanted, granted }
    holder.requests.push(request)
    this.#asking.add(holder)
    this.#waiting++
    return () => {
      const at = holder.requests.indexOf(request)
      if (at < 0) return
      holder.requests.splice(at, 1)
      this.#waiting--
      if (holder.requests.length === 0) this.#asking.delete(holder)
      this.#forget(holder)
      // The request it leaves may have been what held others back.
      this.#serve()
    }
  }

  /**
   * A stream's unsent bytes are now `unsent`: grown as it wrote, or fewer as its client took them.
   * Growth is taken out of `from` first, the room the stream took for what it wrote, so the total
   * counts it once. The account is brought up to date before any waiting request is granted: a
   * stream granted room by what this frees reports again at once, and must not count the change twice.
   */
  report (account: Account, unsent: number, from?: Room): void {
    const delta = unsent - account.counted
    if (delta === 0) return
    account.counted = unsent
    this.#adjust(account.address, delta, from)
  }

  /** Gives back what is left of `room`. */
  release (room: Room): void {
    if (room.bytes === 0) return
    const bytes = room.bytes
    room.bytes = 0
    this.#adjust(room.address, -bytes)
  }

  #adjust (address: string, delta: number, from?: Room): void {
    let change = delta
    if (from !== undefined && delta > 0) {
      const covered = Math.min(delta, from.bytes)
      from.bytes -= covered
      change -= covered
    }
    if (change === 0) return
    const holder = this.#holder(address)
    holder.held += change
    this.#held += change
    if (this.#held > this.#highest) this.#highest = this.#held
    this.#forget(holder)
    // Less held makes room; more held by an address that waits may make another the one to serve.
    this.#serve()
  }

  #holder (address: string): Holder {
    let holder = this.#holders.get(address)
    if (holder === undefined) {
      holder = { address, held: 0, requests: [] }
      this.#holders.set(address, holder)
    }
    return holder
  }

  #forget (holder: Holder): void {
    if (holder.held === 0 && holder.requests.length === 0) this.#holders.delete(holder.address)
  }

  /** The share rule (see the top). */
  #fits (holder: Holder, bytes: number): boolean {
    const free = this.limit - this.#held
    if (bytes > free) return false
    if (holder.held === 0) return true
    return free - bytes >= (holder.held + bytes <= this.light ? this.answer : this.keptFree)
  }

  /** No address that holds less is waiting. */
  #first (holder: Holder): boolean {
    for (const other of this.#asking) if (other.held < holder.held) return false
    return true
  }

  #grant (holder: Holder, bytes: number): Room {
    holder.held += bytes
    this.#held += bytes
    if (this.#held > this.#highest) this.#highest = this.#held
    return { address: holder.address, bytes }
  }

  /**
   * Grants waiting requests while the address holding least can have its oldest: when it cannot,
   * no one else goes first, so a large request is not passed for ever by smaller ones.
   */
  #serve (): void {
    if (this.#asking.size === 0) return
    const granted: Array<{ request: Request, room: Room }> = []
    for (;;) {
      let next: Holder | undefined
      for (const holder of this.#asking) if (next === undefined || holder.held < next.held) next = holder
      if (next === undefined) break
      const request = next.requests[0]!
      if (!this.#fits(next, request.bytes)) break
      next.requests.shift()
      this.#waiting--
      // To the back of the order: among addresses holding as much, each is served in turn.
      this.#asking.delete(next)
      if (next.requests.length > 0) this.#asking.add(next)
      granted.push({ request, room: this.#grant(next, request.bytes) })
    }
    // Told after the books are straight: what they do next may take or give back room.
    for (const { request, room } of granted) request.granted(room)
  }
}
