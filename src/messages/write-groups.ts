import { channel } from 'node:diagnostics_channel'

// Each grouped insert as it ends, published for /metrics (plugins/metrics.ts) without the writer knowing it.

export interface WriteGroup {
  /** Creates in the statement. */
  size: number
  /** How long its oldest create waited in the queue before the statement was sent, in seconds. */
  waitSeconds: number
  /** From sending the statement to its answer (commit included), in seconds. */
  statementSeconds: number
}

export const writeGroups = channel('messages-api:write-group')

export function groupWritten (size: number, queuedAt: number, sentAt: number): void {
  if (!writeGroups.hasSubscribers) return
  const now = performance.now()
  writeGroups.publish({ size, waitSeconds: (sentAt - queuedAt) / 1000, statementSeconds: (now - sentAt) / 1000 } satisfies WriteGroup)
}
