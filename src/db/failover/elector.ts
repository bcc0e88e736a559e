import { connect, type Socket } from 'node:net'
import { Duplex } from 'node:stream'
import { PrimaryUnavailableError } from '../../errors.js'
import { primaryWait } from '../statement-spans.js'
import type { History } from './history.js'
import { parseHosts, type Host } from './hosts.js'
import { ServerProbe, within, type ServerState } from './probe.js'

// Following a failover (CONTRACT 14). What postgres.js 3.4.9 does alone with several hosts and
// target_session_attrs=read-write (test/db/failover/postgres-driver-failover.test.ts): each new connection tries
// the hosts in turn and takes the first that accepts it. It does not skip a hot standby of
// PostgreSQL 14 and later (it judges read-write by default_transaction_read_only alone), so writes
// land on a standby and fail with 25006; with every host refusing, a query waits without end while
// the connection retries the hosts back to back; and an old primary restarted as it was, still
// writable on its old timeline, is written to if it is listed first (split brain).
// The driver lets a socket factory open its connections, and the choice is made there: every host
// is probed, and connections go to the writable one on the latest timeline, or fail at once with a
// 503 when there is none. The driver still checks each session is not a standby ('primary').

export interface ElectorOptions {
  /** How often every host is probed: a promotion is noticed within this, whatever else happens. */
  probeEveryMs: number
  /** How long a new connection may take to be accepted by the elected host. */
  connectTimeoutMs: number
  log: {
    warn: (obj: object, msg: string) => void
    error: (obj: object, msg: string) => void
  }
}

/** The source of the history the service's state must belong to; PGlite's never changes. */
export interface HistorySource {
  /** The current primary's history, or the last one known while no primary answers. */
  current: () => History | undefined
  /** Called after the primary changed history (a promotion, another cluster); returns the unsubscribe. */
  onChange: (listener: (history: History) => void) => () => void
  /** Something looked wrong (a connection failed, a server answered from another history): probe now. */
  suspect: () => void
}

interface Elected { index: number, state: ServerState }

// A connection opened later than this after the last election elects again first: a primary that
// became a standby is then left at once, rather than reconnected to until the next probe.
const FRESH_MS = 250

/**
 * A connection that fails at once with a 503. Not a thrown error: postgres.js 3.4 rejects the
 * query then, but leaves the connection among those connecting, and once every connection of the
 * pool is stuck there every later query waits forever. A socket that errors and closes returns it
 * to the pool like any failed connection. It fails once the driver has written its startup
 * message: closed before that write, the driver keeps the write's timer set, and that connection
 * never sends a startup message again (every later connect times out).
 */
function refused (): Socket {
  const socket: Duplex = new Duplex({
    read () {},
    write (_chunk, _encoding, done) {
      done()
      setImmediate(() => { socket.destroy(new PrimaryUnavailableError()) })
    }
  })
  return socket as unknown as Socket
}

/**
 * A TCP connection to the host once it is established; undefined when refused or not within
 * timeoutMs of time in which the event loop turned (`within`: a stalled loop proves no host dead).
 */
async function open (host: Host, timeoutMs: number): Promise<Socket | undefined> {
  const socket = connect(host.port, host.host)
  let settle = (_result: Socket | undefined): void => {}
  const succeed = (): void => { settle(socket) }
  const fail = (): void => { settle(undefined) }
  const connected = new Promise<Socket | undefined>((resolve) => { settle = resolve })
  socket.once('connect', succeed).once('error', fail)
  const result = await within(connected, timeoutMs).catch(() => undefined)
  socket.off('connect', succeed).off('error', fail)
  if (result === undefined) socket.destroy()
  return result
}

export class PrimaryElector implements HistorySource {
  readonly #hosts: Host[]
  readonly #probes: ServerProbe[]
  readonly #options: ElectorOptions
  readonly #listeners = new Set<(history: History) => void>()
  // Sockets opened for the pool, with the election they were opened under.
  readonly #sockets = new Map<Socket, number>()
  #elected: Elected | undefined
  // The primary whose connections are open: the last one followed.
  #followed: Elected | undefined
  #history: History | undefined
  #generation = 0
  // When the last election's probes began.
  #electedAt = 0
  // The latest timeline any server reported: a writable server behind it is a primary from the past.
  #latestTimeline = 0
  #running: Promise<Elected | undefined> | undefined
  #timer: NodeJS.Timeout | undefined
  #lost = false

  constructor (url: string, options: ElectorOptions) {
    const { hosts, urlOf } = parseHosts(url)
    this.#hosts = hosts
    this.#probes = hosts.map((host) => new ServerProbe(urlOf(host)))
    this.#options = options
  }

  /** The first election, then one every probeEveryMs until close(). */
  async start (): Promise<void> {
    await this.elect()
    this.#timer = setInterval(() => { this.suspect() }, this.#options.probeEveryMs).unref()
  }

  current = (): History | undefined => this.#history

  onChange = (listener: (history: History) => void): (() => void) => {
    this.#listeners.add(listener)
    return () => { this.#listeners.delete(listener) }
  }

  suspect = (): void => { this.elect().catch(() => {}) }

  /** Probes every host (once for everyone asking meanwhile) and follows the primary it finds. */
  elect (): Promise<Elected | undefined> {
    this.#running ??= this.#elect().finally(() => { this.#running = undefined })
    return this.#running
  }

  /**
   * postgres.js's `socket` option: each new pool connection goes to the elected primary, elected
   * again first when the last election is not fresh. No writable primary: the query fails at once
   * with a 503 (never waits for one).
   */
  socket = async (): Promise<Socket> => {
    try {
      return await this.#connect()
    } catch {
      // Never thrown to the driver: it would keep the connection among those connecting (see refused).
      return refused()
    }
  }

  async #connect (): Promise<Socket> {
    const asked = Date.now()
    const fresh = this.#elected !== undefined && asked - this.#electedAt < FRESH_MS
    // Waiting for an election, or finding no primary, is a step of the request the connection is for (CONTRACT 15).
    const waited = fresh ? undefined : primaryWait()
    let elected = fresh ? this.#elected : await this.elect()
    // An election already running when the connection was asked for may have probed a server still
    // starting: none found is only believed from probes begun after the ask.
    if (elected === undefined && this.#electedAt < asked) elected = await this.elect()
    const host = elected === undefined ? undefined : this.#hosts[elected.index]
    waited?.(host)
    if (host === undefined) return refused()
    const generation = this.#generation
    // Handed over connected: a host that died since its election refuses here, and the driver gets
    // a socket that fails only after its startup write (see refused).
    const socket = await open(host, this.#options.connectTimeoutMs)
    if (socket === undefined) {
      this.suspect()
      return refused()
    }
    // Another primary was followed while this one connected: its connections are being closed.
    if (generation !== this.#generation) {
      socket.destroy()
      return await this.#connect()
    }
    // postgres.js names the TLS server from it.
    Object.assign(socket, { host: host.host })
    this.#sockets.set(socket, generation)
    socket.once('close', (hadError) => {
      this.#sockets.delete(socket)
      if (hadError) this.suspect()
    })
    return socket
  }

  async close (): Promise<void> {
    clearInterval(this.#timer)
    await Promise.all(this.#probes.map(async (probe) => probe.close()))
  }

  async #elect (): Promise<Elected | undefined> {
    const startedAt = Date.now()
    const states = await Promise.all(this.#probes.map(async (probe) => probe.read()))
    for (const state of states) if (state !== undefined && state.timeline > this.#latestTimeline) this.#latestTimeline = state.timeline
    const chosen = this.#choose(states)
    this.#electedAt = startedAt
    if (chosen === undefined) {
      if (this.#elected !== undefined || !this.#lost) this.#options.log.error({ hosts: this.#hosts.length }, 'no writable database primary: writes answer 503 until one is promoted')
      this.#lost = true
      this.#elected = undefined
      return undefined
    }
    // Compared with the primary followed last, not the last election's result (none while lost): the
    // same server on the same timeline, answering again after a while, keeps its connections, and the
    // queries running on them (a probe that timed out proves no connection dead; a crash has closed them).
    const followed = this.#followed
    const moved = followed === undefined || followed.index !== chosen.index || followed.state.timeline !== chosen.state.timeline ||
      followed.state.system !== chosen.state.system
    this.#elected = chosen
    if (moved) {
      await this.#follow(chosen, followed)
    } else if (this.#lost) {
      const host = this.#hosts[chosen.index]
      this.#options.log.warn({ host: host?.host, port: host?.port, timeline: chosen.state.timeline }, 'the database primary answers again')
    }
    this.#lost = false
    return chosen
  }

  /**
   * The writable host on the latest timeline of the cluster followed so far; of two on that
   * timeline, the one followed already, else the first listed. None writable: undefined.
   */
  #choose (states: Array<ServerState | undefined>): Elected | undefined {
    let best: Elected | undefined
    for (const [index, state] of states.entries()) {
      if (state === undefined || state.standby || state.timeline < this.#latestTimeline) continue
      if (this.#history !== undefined && state.system !== this.#history.system) continue
      if (best === undefined || state.timeline > best.state.timeline || (state.timeline === best.state.timeline && index === this.#followed?.index)) best = { index, state }
    }
    return best
  }

  /** A primary (another, or the same on a new timeline): its history, and no connection left elsewhere. */
  async #follow (chosen: Elected, previous: Elected | undefined): Promise<void> {
    // Counted before any wait: a connection opened to the new primary meanwhile belongs to it.
    const generation = ++this.#generation
    this.#followed = chosen
    const host = this.#hosts[chosen.index]
    const known = this.#history
    const changed = known === undefined || known.system !== chosen.state.system || known.timeline !== chosen.state.timeline
    if (changed) {
      const switchpoints = await this.#probes[chosen.index]?.switchpoints(chosen.state.timeline)
      this.#history = { system: chosen.state.system, timeline: chosen.state.timeline, switchpoints }
      if (known !== undefined && switchpoints === undefined) {
        this.#options.log.warn({ timeline: chosen.state.timeline }, 'cannot read the timeline history (pg_read_file): sync tokens from before the promotion expire')
      }
    }
    // Connections still open to the old primary, or opened before this election, are closed: the
    // pool opens new ones here. A query running on one fails and is answered 503. Closed on the next
    // turn of the event loop, after the driver's deferred startup write of a connection it was just
    // handed: closed before that write, a postgres.js 3.4.9 connection never writes again.
    const stale = [...this.#sockets].filter(([, opened]) => opened < generation).map(([socket]) => socket)
    if (stale.length > 0) setImmediate(() => { for (const socket of stale) socket.destroy() })
    if (previous !== undefined || known !== undefined) {
      this.#options.log.warn({ host: host?.host, port: host?.port, timeline: chosen.state.timeline }, 'following the database primary')
    }
    if (changed && known !== undefined && this.#history !== undefined) for (const listener of this.#listeners) listener(this.#history)
  }
}
