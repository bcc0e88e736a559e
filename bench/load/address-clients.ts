/**
 * Clients of their own loopback addresses, each a closed loop (one request, its answer, the next), all
 * running in one window: what the service sees as several clients at once (CONTRACT 16 tells them
 * apart by address). autocannon binds every connection to one address, so these use undici.
 */
import { Agent, request } from 'undici'

/** One request of a load. */
export interface AddressRequest {
  method: 'GET' | 'POST'
  path: string
  headers?: Record<string, string>
  body?: string
}

export interface AddressLoad {
  /** The loopback address every connection of the load is bound to: the client the service sees. */
  address: string
  /** Requests in flight at once (connections). */
  clients: number
  /** The n-th request of the load (from 0), or undefined when it has no more to send. */
  next: (n: number) => AddressRequest | undefined
  /** At the end of the window, requests still unanswered are abandoned (the client disconnects) rather than awaited. */
  abandonAtEnd?: boolean
}

export interface AddressResult {
  /** Answers by status. */
  statuses: Record<number, number>
  /** Milliseconds from sending to the whole answer, of every answer. */
  latencies: number[]
  /** Requests that failed without an answer (connection errors, the timeout). */
  errors: number
  /** Requests still unanswered when the window ended and the load abandoned them. */
  abandoned: number
  /** Answers 503 without a Retry-After header. */
  withoutRetryAfter: number
  /** Seconds from the first request to the last answer. */
  seconds: number
}

export interface AddressWindow {
  base: string
  seconds: number
  /** Requests sent at most by each load. */
  maxRequests: number
  /** How long one request may go without its answer before it counts as an error. */
  timeoutMs: number
}

/** Runs every load in the same window; each stops at the end of the window, of its requests or of maxRequests. */
export async function runAddressLoads (loads: readonly AddressLoad[], window: AddressWindow): Promise<AddressResult[]> {
  const ends = performance.now() + window.seconds * 1000
  return await Promise.all(loads.map(async (load) => await runLoad(load, window, ends)))
}

async function runLoad (load: AddressLoad, window: AddressWindow, ends: number): Promise<AddressResult> {
  const agent = new Agent({ localAddress: load.address, connections: load.clients })
  const result: AddressResult = { statuses: {}, latencies: [], errors: 0, abandoned: 0, withoutRetryAfter: 0, seconds: 0 }
  const abandon = new AbortController()
  const timer = load.abandonAtEnd === true ? setTimeout(() => { abandon.abort() }, Math.max(0, ends - performance.now())) : undefined
  let sent = 0
  const began = performance.now()
  let last = began
  const client = async (): Promise<void> => {
    for (;;) {
      if (performance.now() >= ends || sent >= window.maxRequests) return
      const next = load.next(sent++)
      if (next === undefined) return
      const start = performance.now()
      try {
        const response = await request(window.base + next.path, {
          dispatcher: agent,
          method: next.method,
          headers: next.headers,
          body: next.body,
          signal: AbortSignal.any([abandon.signal, AbortSignal.timeout(window.timeoutMs)])
        })
        await response.body.dump()
        last = performance.now()
        result.latencies.push(last - start)
        result.statuses[response.statusCode] = (result.statuses[response.statusCode] ?? 0) + 1
        if (response.statusCode === 503 && response.headers['retry-after'] === undefined) result.withoutRetryAfter++
      } catch {
        if (abandon.signal.aborted) result.abandoned++
        else result.errors++
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: load.clients }, client))
  } finally {
    clearTimeout(timer)
    await agent.destroy()
  }
  result.seconds = (last - began) / 1000
  return result
}

/** The `q`-quantile of `values` (milliseconds), 0 when there is none. */
export function quantile (values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * q) - 1))] ?? 0
}
