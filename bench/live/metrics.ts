/** The service's live-delivery counters and gauges, read from GET /metrics (Prometheus text, CONTRACT 13). */
import { setTimeout as sleep } from 'node:timers/promises'
import { request } from 'undici'
import { BenchError } from '../run/bench-error.js'

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

// GET /metrics is not exempt from load shedding (only the probes are): a 503 is tried again.
const TRIES = 40
const RETRY_MS = 250

/** Times GET /metrics was answered 503 (load shedding) and tried again, over the run. */
export let metricsShed = 0

async function metricsText (base: string): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const response = await request(`${base}/metrics`, { headersTimeout: 10_000, bodyTimeout: 10_000 })
    const text = await response.body.text()
    if (response.statusCode === 200) return text
    if (response.statusCode !== 503 || attempt >= TRIES) throw new BenchError(`GET /metrics answered ${response.statusCode}`)
    metricsShed++
    await sleep(RETRY_MS)
  }
}

export async function readLiveMetrics (base: string): Promise<LiveMetrics> {
  const found = sums(await metricsText(base), NAMES)
  return {
    watchQueries: found.get('live_watch_queries_total') ?? Number.NaN,
    answerReads: found.get('live_answer_reads_total') ?? Number.NaN,
    heldPolls: found.get('live_long_polls_held') ?? 0,
    openStreams: found.get('live_streams_open') ?? 0
  }
}
