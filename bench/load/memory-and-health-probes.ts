/** What is watched beside a load: a server's resident memory, and how long its liveness probe waits. */
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { request } from 'undici'
import type { Measurement } from '../report/bench-report.js'

const RSS_SAMPLE_MS = 100
const PROBE_INTERVAL_MS = 50

/** Samples VmRSS of a process every RSS_SAMPLE_MS; stop() returns the peak in MB. */
export function sampleRss (pid: number | undefined): { stop: () => number } {
  let peakKb = 0
  const read = (): void => {
    try {
      const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
      if (match !== null) peakKb = Math.max(peakKb, Number(match[1]))
    } catch {}
  }
  read()
  const timer = setInterval(read, RSS_SAMPLE_MS)
  return { stop: () => { clearInterval(timer); read(); return peakKb / 1024 } }
}

/**
 * GET `url` (a server's /health), one at a time every PROBE_INTERVAL_MS, while a row runs: how long a liveness probe waits
 * while the service is busy with the row (a load balancer would take an instance out past its timeout).
 */
export function probeHealth (url: string): { stop: () => Promise<NonNullable<Measurement['health']>> } {
  const latencies: number[] = []
  let failed = 0
  const state = { stopped: false }
  const loop = (async () => {
    while (!state.stopped) {
      const began = performance.now()
      try {
        const response = await request(url, { headersTimeout: 10_000, bodyTimeout: 10_000 })
        await response.body.text()
        if (response.statusCode !== 200) failed++
      } catch {
        failed++
      }
      latencies.push(performance.now() - began)
      await sleep(PROBE_INTERVAL_MS)
    }
  })()
  return {
    async stop () {
      state.stopped = true
      await loop
      const sorted = latencies.sort((a, b) => a - b)
      const p99 = sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0
      return { count: sorted.length, failed, p99, max: sorted[sorted.length - 1] ?? 0 }
    }
  }
}
