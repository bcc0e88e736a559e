/** Where tracing's own trouble is reported: the service's logger, at warn. */
export interface WarnLog {
  warn: (obj: object, msg: string) => void
}

export const WARNING_INTERVAL_MS = 60_000

/**
 * CONTRACT 15: a collector that is down, slow or failing costs at most one warning a minute. The
 * exporter fails once per batch and the SDK reports every failure; the first of a minute is logged,
 * the rest are counted into the next line.
 */
export function oncePerInterval (log: WarnLog, intervalMs = WARNING_INTERVAL_MS, now: () => number = Date.now): (message: string, err?: unknown) => void {
  let last = Number.NEGATIVE_INFINITY
  let suppressed = 0
  return function warn (message, err) {
    const at = now()
    if (at - last < intervalMs) {
      suppressed++
      return
    }
    last = at
    // Only the message: exporter errors can carry the collector's response and the request's options.
    const detail = err instanceof Error ? { err: { message: err.message } } : {}
    log.warn({ ...detail, ...(suppressed > 0 ? { suppressed } : {}) }, `tracing: ${message}`)
    suppressed = 0
  }
}
