/** autocannon, the load generator, run inside the bench process: one load at a time. */
import type { EventEmitter } from 'node:events'
import { createRequire } from 'node:module'

// autocannon ships no types; only what the benchmark uses is declared.
export interface CannonRequest {
  method?: string
  path?: string
  headers?: Record<string, string>
  body?: string
  setupRequest?: (request: CannonRequest, context: Record<string, unknown>) => CannonRequest
  onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: Record<string, string>) => void
}
export interface CannonOptions {
  url: string
  connections: number
  duration: number
  maxOverallRequests: number
  timeout: number
  method?: string
  headers?: Record<string, string>
  requests?: CannonRequest[]
  verifyBody?: (body: string) => boolean
}
export interface CannonResult {
  requests: { average: number, total: number }
  /** Seconds from the first request to the last answer. */
  duration: number
  latency: { p50: number, p99: number }
  non2xx: number
  errors: number
  timeouts: number
  mismatches: number
  statusCodeStats: Record<string, { count: number }>
}
interface CannonInstance extends EventEmitter { stop: () => void }
type Autocannon = (options: CannonOptions, done: (err: Error | null, result: CannonResult) => void) => CannonInstance
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon

let current: CannonInstance | undefined

export function runCannon (options: CannonOptions): Promise<CannonResult> {
  return new Promise((resolve, reject) => {
    // Belt and braces: autocannon stops itself after `duration`, this stops it if it does not.
    const watchdog = setTimeout(() => current?.stop(), (options.duration + 30) * 1000)
    current = autocannon(options, (err, result) => {
      clearTimeout(watchdog)
      current = undefined
      if (err !== null) reject(err)
      else resolve(result)
    })
  })
}

/** Stops the load under way, if any (on an error or a signal). */
export function stopCannon (): void {
  current?.stop()
}
