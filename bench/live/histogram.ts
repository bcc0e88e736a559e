/**
 * Delays in milliseconds, counted in 0.1 ms buckets up to 10 s (the rare delay beyond is kept as is), so a
 * row's millions of receipts cost a fixed 400 KB and their percentiles stay exact to 0.1 ms.
 */
const BUCKET_MS = 0.1
const BUCKETS = 100_000

export interface DelayStats {
  count: number
  p50: number
  p99: number
  max: number
  /** Receipts seen before the writer saw its own commit return (counted as 0 ms). */
  early: number
}

export class DelayHistogram {
  private readonly buckets = new Uint32Array(BUCKETS)
  private readonly beyond: number[] = []
  private count = 0
  private max = 0
  private early = 0

  record (ms: number): void {
    if (ms < 0) {
      this.early++
      ms = 0
    }
    const bucket = Math.floor(ms / BUCKET_MS)
    if (bucket < BUCKETS) this.buckets[bucket]!++
    else this.beyond.push(ms)
    this.count++
    if (ms > this.max) this.max = ms
  }

  private percentile (fraction: number): number {
    if (this.count === 0) return 0
    const rank = Math.max(1, Math.ceil(this.count * fraction))
    let seen = 0
    for (let b = 0; b < BUCKETS; b++) {
      seen += this.buckets[b]!
      if (seen >= rank) return (b + 1) * BUCKET_MS
    }
    const sorted = [...this.beyond].sort((a, b) => a - b)
    return sorted[rank - seen - 1] ?? this.max
  }

  stats (): DelayStats {
    return { count: this.count, p50: this.percentile(0.5), p99: this.percentile(0.99), max: this.max, early: this.early }
  }
}

/** The `p` quantile (0–1) of values sorted ascending; 0 for none. */
export function percentile (sorted: readonly number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
}
