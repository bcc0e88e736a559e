import { connect, createServer, type Server, type Socket } from 'node:net'
import type { Test } from 'tap'

// A slow link on loopback: a TCP proxy in front of a server that carries what the server sends at a
// given rate (bytes a second), or stops reading it altogether, as a phone on a mobile network or in
// the background does. What the client sends goes through at once. The proxy reads the server's side
// only as fast as the rate allows, so the server's socket sees a client that reads at that rate: its
// send queue and the system's buffers fill as they would.

/** How often the proxy passes on what the rate allows. */
const TICK_MS = 20

export interface Connection {
  /** The request bytes the client sent, as text (headers included). */
  request: string
  /** Bytes passed on to the client. */
  delivered: number
  /** The first MiB passed on to the client, as text. */
  response: string
  /** Ends both sides at once, as a dropped mobile connection does. */
  drop: () => void
  /** Closes the client's side cleanly once it has everything passed on so far, and the server's at once. */
  end: () => void
}

const RECORDED_BYTES = 1_048_576

export class SlowLink {
  readonly connections: Connection[] = []
  #rate: number
  #stopped = false
  #server!: Server
  #port = 0

  private constructor (private readonly target: { host: string, port: number, localAddress: string | undefined }, bytesPerSecond: number) {
    this.#rate = bytesPerSecond
  }

  /**
   * A link to `target` (an http:// origin), closed when the test ends; `bytesPerSecond` Infinity passes
   * everything on at once. `from`: the loopback address its connections to the server come from (the
   * client address the server sees), e.g. 127.0.0.2; by default the system's choice, 127.0.0.1.
   */
  static async open (t: Test, target: string, bytesPerSecond: number, options: { from?: string } = {}): Promise<SlowLink> {
    const { hostname, port } = new URL(target)
    const link = new SlowLink({ host: hostname, port: Number(port), localAddress: options.from }, bytesPerSecond)
    await link.#listen()
    t.teardown(() => { link.close() })
    return link
  }

  /** The link's own origin, to use in place of the server's. */
  get url (): string {
    return `http://127.0.0.1:${this.#port}`
  }

  /** Stops reading from the server, as a client whose app no longer reads. */
  stop (): void {
    this.#stopped = true
  }

  /** Reads again, at `bytesPerSecond` (default: the rate it had). */
  resume (bytesPerSecond = this.#rate): void {
    this.#rate = bytesPerSecond
    this.#stopped = false
  }

  close (): void {
    for (const connection of this.connections) connection.drop()
    this.#server.close()
  }

  async #listen (): Promise<void> {
    this.#server = createServer((client) => { this.#carry(client) })
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve))
    const address = this.#server.address()
    if (address === null || typeof address === 'string') throw new Error('the slow link has no port')
    this.#port = address.port
  }

  #carry (client: Socket): void {
    const { host, port, localAddress } = this.target
    const upstream = connect({ host, port, localAddress })
    const connection: Connection = {
      request: '',
      delivered: 0,
      response: '',
      drop: () => {
        clearInterval(ticker)
        client.destroy()
        upstream.destroy()
      },
      end: () => {
        clearInterval(ticker)
        upstream.destroy()
        client.end()
      }
    }
    this.connections.push(connection)
    client.on('data', (bytes: Buffer) => {
      connection.request += bytes.toString('latin1')
      upstream.write(bytes)
    })
    client.on('error', () => {})
    upstream.on('error', () => {})
    client.on('close', () => { connection.drop() })
    // Paused: the proxy reads only what it passes on, and the socket stops reading from the system
    // once its own small buffer is full.
    upstream.pause()
    let ended = false
    upstream.on('end', () => { ended = true })
    upstream.on('close', () => { ended = true })
    // Passes on what the rate allows this tick (everything buffered, at full speed).
    const pass = (): void => {
      if (this.#stopped) return
      let allowance = Number.isFinite(this.#rate) ? Math.max(1, Math.floor(this.#rate * TICK_MS / 1000)) : Number.POSITIVE_INFINITY
      while (allowance > 0 && upstream.readableLength > 0) {
        const bytes = upstream.read(Math.min(allowance, upstream.readableLength)) as Buffer | null
        if (bytes === null) break
        allowance -= bytes.length
        connection.delivered += bytes.length
        if (connection.response.length < RECORDED_BYTES) connection.response += bytes.toString('utf8')
        client.write(bytes)
      }
      // What the server sent before it closed is passed on first.
      if (ended && upstream.readableLength === 0) {
        clearInterval(ticker)
        client.end()
      }
    }
    const ticker = setInterval(pass, TICK_MS)
    // `read` only returns what the socket has buffered; at full speed it is passed on as it arrives.
    upstream.on('readable', () => { if (!Number.isFinite(this.#rate)) pass() })
  }
}
