/** GET /metrics of the service under measurement (Prometheus text), tried again while load shedding answers 503. */
import { setTimeout as sleep } from 'node:timers/promises'
import { request } from 'undici'
import { BenchError } from '../run/bench-error.js'

// GET /metrics is not exempt from load shedding (only the probes are): a 503 is tried again.
const TRIES = 40
const RETRY_MS = 250

export async function metricsText (base: string): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const response = await request(`${base}/metrics`, { headersTimeout: 10_000, bodyTimeout: 10_000 })
    const text = await response.body.text()
    if (response.statusCode === 200) return text
    if (response.statusCode !== 503 || attempt >= TRIES) throw new BenchError(`GET /metrics answered ${response.statusCode}`)
    await sleep(RETRY_MS)
  }
}

/** Each sample of a metric family: its name, its labels, its value. */
export function samples (text: string): Array<{ name: string, labels: Record<string, string>, value: number }> {
  const found: Array<{ name: string, labels: Record<string, string>, value: number }> = []
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line)
    if (match === null) continue
    const labels: Record<string, string> = {}
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)) labels[key!] = value!
    found.push({ name: match[1]!, labels, value: Number(match[3]) })
  }
  return found
}

/** The sum over every label set of each metric named in `names`. */
export function sums (text: string, names: readonly string[]): Map<string, number> {
  const found = new Map<string, number>()
  for (const { name, value } of samples(text)) {
    if (names.includes(name) && Number.isFinite(value)) found.set(name, (found.get(name) ?? 0) + value)
  }
  return found
}
