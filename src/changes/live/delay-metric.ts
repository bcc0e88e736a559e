import { channel } from 'node:diagnostics_channel'

// Each live answer and event as it is written, with its delay, published for /metrics
// (plugins/metrics.ts) without the delivery knowing it.

/** Seconds from the moment a change became answerable to its answer or event being written. */
export const liveDeliveries = channel('messages-api:live-delivery')

export function delivered (delaySeconds: number): void {
  if (liveDeliveries.hasSubscribers) liveDeliveries.publish(delaySeconds)
}
