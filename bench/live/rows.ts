/** The live rows (CONTRACT 9, 13): their keys on the command line, in the order they run, and what each asks for. */
import type { LiveMode } from './protocol.js'

export interface DeliverySpec { key: string, mode: LiveMode, connections: number, rate: number }

// Long-poll and SSE at each size, with the write rate the issue sets for it.
export const DELIVERY_ROWS: readonly DeliverySpec[] = [
  { key: 'live-poll-100', mode: 'poll', connections: 100, rate: 100 },
  { key: 'live-sse-100', mode: 'sse', connections: 100, rate: 100 },
  { key: 'live-poll-1000', mode: 'poll', connections: 1000, rate: 50 },
  { key: 'live-sse-1000', mode: 'sse', connections: 1000, rate: 50 },
  { key: 'live-poll-10000', mode: 'poll', connections: 10_000, rate: 5 },
  { key: 'live-sse-10000', mode: 'sse', connections: 10_000, rate: 5 }
]

// `rate`: the first step's, doubled at each step after it.
export const SATURATION_ROWS: readonly DeliverySpec[] = [
  { key: 'live-saturation-sse', mode: 'sse', connections: 1000, rate: 10 },
  { key: 'live-saturation-poll', mode: 'poll', connections: 1000, rate: 10 }
]

// A phone back from the background on a slow link, 500 times over, each from another position (catch-up.ts).
export const CATCH_UP_KEY = 'live-catch-up'
export const CATCH_UP_STREAMS = 500
export const CATCH_UP_RATE = 128 * 1024
export const CATCH_UP_WRITES = 20

export function catchUpName (): string {
  return `SSE catch-up, ${CATCH_UP_STREAMS} streams each through its own ${CATCH_UP_RATE / 1024} KB/s link, ${CATCH_UP_WRITES} writes/s`
}

// CONTRACT 16, live delivery shared fairly: slow streams from one address, and streams of other clients (fair.ts).
export const FAIR_KEY = 'live-fair'
export const FAIR_SLOW_STREAMS = 64
export const FAIR_SLOW_RATE = 1024
export const FAIR_STREAMS = 20
export const FAIR_WRITES = 20

export function fairName (): string {
  return `Fairness, ${FAIR_SLOW_STREAMS} streams from one address each read at ${FAIR_SLOW_RATE / 1024} KB/s, ${FAIR_STREAMS} streams from ${FAIR_STREAMS} other addresses, ${FAIR_WRITES} writes/s`
}

export const MEMORY_KEY = 'live-memory'
export const MEMORY_CONNECTIONS = 10_000
export const WRITE_PATH_KEY = 'live-write-path'
export const WRITE_PATH_CLIENTS = 1000

// In the order they run (section.ts).
export const LIVE_KEYS: readonly string[] = [MEMORY_KEY, ...DELIVERY_ROWS.map((r) => r.key), CATCH_UP_KEY, FAIR_KEY, ...SATURATION_ROWS.map((r) => r.key), WRITE_PATH_KEY]
// The embedded database's live rows: 100 and 1,000 clients. The write path compares two services on one
// database, which an embedded database (one process's own) cannot be.
export const EMBEDDED_LIVE_KEYS: readonly string[] = DELIVERY_ROWS.filter((r) => r.connections <= 1000).map((r) => r.key)
// The catch-up row writes its changes through a connection of its own.
export const POSTGRES_ONLY_LIVE_KEYS: readonly string[] = [CATCH_UP_KEY, WRITE_PATH_KEY]

export function deliveryName (spec: DeliverySpec): string {
  return `${spec.mode === 'sse' ? 'SSE' : 'long-poll'}, ${spec.connections.toLocaleString('en-US')} clients, ${spec.rate} writes/s`
}
