/** The messages between the benchmark and its live load client (client.ts), a process of its own, over the IPC channel. */
import type { DelayStats } from './histogram.js'

export type LiveMode = 'sse' | 'poll'

/** Wall-clock milliseconds, comparable between the processes of one machine. */
export const wallClock = (): number => performance.timeOrigin + performance.now()

/** A write of a row: its message id, when it was sent, and when its commit returned to the writer. */
export interface CommittedWrite { id: number, start: number, commit: number }

/**
 * The times of a write found in the table whose answer the writer never saw (autocannon stops listening
 * at its duration): it must be delivered like any other, but has no delay, and no order is asked of it.
 * Finite, as the IPC channel's JSON has no Infinity.
 */
export const UNKNOWN_START = 0
export const UNKNOWN_COMMIT = Number.MAX_VALUE

export type ToClient =
  /** Opens `connections` clients at `since`; ids from `baseId` up are the row's writes. */
  | { kind: 'open', base: string, mode: LiveMode, connections: number, since: string, baseId: number }
  /** Commit times, as the writer learns them. */
  | { kind: 'commits', ids: number[], times: number[] }
  /** The delays and deliveries since the last window (a step of the saturation row). */
  | { kind: 'window' }
  /** Every write of the row: waits until each client holds them all (or `drainMs`), closes the clients, checks them. */
  | { kind: 'finish', writes: CommittedWrite[], drainMs: number }
  /** Closes the clients without checks (the idle streams of the memory row). */
  | { kind: 'close' }

export interface WindowReport {
  delay: DelayStats
  /** Non-empty answers received, summed over the clients (SSE events, long-poll answers with data). */
  events: number
  /** Change entries received, summed over the clients. */
  entries: number
  /** Wall-clock span of the window: from its start to its last receipt. */
  first: number
  last: number
}

export interface ExactnessReport {
  /** Clients that ended holding every write of the row. */
  complete: number
  /** Writes missing, summed over the clients, and the first client's missing ids (a few). */
  missing: number
  missingExample: number[]
  /** Clients that received a write before one that had committed before it began. */
  outOfOrder: number
  outOfOrderExample?: string
  /** Upserts of ids the row did not write, summed over the clients. */
  unexpected: number
  /** Entries received again by a client that already held them (allowed: CONTRACT 12). */
  repeated: number
  /** Distinct orders in which the clients first received the writes, and distinct final positions. */
  orders: number
  positions: number
  /** Milliseconds from `finish` until every client held every write (or the drain ran out). */
  drainMs: number
}

export type FromClient =
  | { kind: 'opened', open: number, failures: string[], seconds: number }
  | { kind: 'window', window: WindowReport }
  | { kind: 'finished', total: WindowReport, exact: ExactnessReport, reconnects: number, errors: string[], errorCount: number }
  | { kind: 'closed', reconnects: number, errors: string[], errorCount: number }
