// Under overload the service refuses thousands of requests a second. Each refusal is expected and
// alike, so they are counted and logged as one summary line a second at most: a line per request
// would grow the log as fast as the traffic being refused, and bury real errors.
export const SHED_SUMMARY_INTERVAL_MS = 1_000

/** The one logger method used; a Fastify logger is one. */
export interface SummaryLog {
  warn: (fields: { shed: number }, msg: string) => void
}

export interface ShedCounter {
  /** One more request answered 503. */
  add: () => void
  /** Logs the pending count now (nothing when there is none); called on close so no count is lost. */
  flush: () => void
}

export function createShedCounter (log: SummaryLog, intervalMs = SHED_SUMMARY_INTERVAL_MS): ShedCounter {
  const seconds = intervalMs / 1000
  let pending = 0
  let timer: NodeJS.Timeout | undefined

  function flush (): void {
    clearTimeout(timer)
    timer = undefined
    if (pending === 0) return
    const shed = pending
    pending = 0
    log.warn({ shed }, `load shed: answered 503 to ${shed} requests in the last ${seconds} s`)
  }

  return {
    add () {
      pending++
      // The first refusal after a quiet spell starts the interval: no timer runs while nothing is
      // shed, and unref'd, it never holds the process open.
      if (timer === undefined) {
        timer = setTimeout(flush, intervalMs)
        timer.unref()
      }
    },
    flush
  }
}
