/** The service's live-delivery counters and gauges, read from GET /metrics (Prometheus text, CONTRACT 13). */
import { metricsText } from '../servers/service-metrics.js'

export interface LiveMetrics {
  /** Head reads of the change log by the instance's watcher. */
  watchQueries: number
  /** Change pages read for waiting positions. */
  answerReads: number
  heldPolls: number
  openStreams: number
}

/** The sum over every label set of each metric named in `names`. */
function sums (text: string, names: readonly string[]): Map<string, number> {
  const found = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue
    const name = /^[a-zA-Z_:][\w:]*/.exec(line)?.[0]
    if (name === undefined || !names.includes(name)) continue
    const value = Number(line.slice(line.lastIndexOf(' ') + 1))
    if (Number.isFinite(value)) found.set(name, (found.get(name) ?? 0) + value)
  }
  return found
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
