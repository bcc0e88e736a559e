/** The service's live-delivery counters and gauges, read from GET /metrics (Prometheus text, CONTRACT 13). */
import { metricsText, sums } from '../servers/service-metrics.js'

export interface LiveMetrics {
  /** Head reads of the change log by the instance's watcher. */
  watchQueries: number
  /** Change pages read for waiting positions. */
  answerReads: number
  heldPolls: number
  openStreams: number
}

const NAMES = ['live_watch_queries_total', 'live_answer_reads_total', 'live_long_polls_held', 'live_streams_open'] as const

export async function readLiveMetrics (base: string): Promise<LiveMetrics> {
  const found = sums(await metricsText(base), NAMES)
  return {
    watchQueries: found.get('live_watch_queries_total') ?? Number.NaN,
    answerReads: found.get('live_answer_reads_total') ?? Number.NaN,
    heldPolls: found.get('live_long_polls_held') ?? 0,
    openStreams: found.get('live_streams_open') ?? 0
  }
}
