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
