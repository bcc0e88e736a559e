import { channel } from 'node:diagnostics_channel'

// How each deep page was read, published for /metrics (plugins/metrics.ts) without the reader knowing it.

/** How a page at NEAR_START or deeper was read. */
export type DeepPageVia = 'anchor' | 'rank' | 'offset'

export interface DeepPageRead {
  table: string
  via: DeepPageVia
  /** From anchors still being read (via 'anchor' only). */
  partial?: boolean
  /** From anchors following the rows created since they were read (via 'anchor' only). */
  followed?: boolean
}

/** A message for each page read at NEAR_START or deeper, for /metrics. */
export const deepPageReads = channel('messages-api:deep-page')

export function readVia (table: string, via: DeepPageVia, partial?: boolean, followed?: boolean): void {
  if (!deepPageReads.hasSubscribers) return
  const read: DeepPageRead = { table, via }
  if (partial !== undefined) read.partial = partial
  if (followed !== undefined) read.followed = followed
  deepPageReads.publish(read)
}

/** A read of a result set's anchors that ended: whole ('complete'), or given up ('abandoned': a write, a failure). */
export interface AnchorSetRead {
  table: string
  sort: string
  outcome: 'complete' | 'abandoned'
  seconds: number
  /** Anchors in the set read (0 when abandoned). */
  anchors: number
}

/** A message for each anchor read that ended, for /metrics: how long result sets wait for their anchors. */
export const anchorSetReads = channel('messages-api:anchor-read')

export function anchorSetRead (read: AnchorSetRead): void {
  if (anchorSetReads.hasSubscribers) anchorSetReads.publish(read)
}
