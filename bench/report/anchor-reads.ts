/** How long the service's result sets went without their anchors over the run, from its GET /metrics. */
import { metricsText, samples } from '../servers/service-metrics.js'

export interface AnchorReads {
  sort: string
  outcome: string
  /** Reads that ended so. */
  count: number
  /** Their seconds together, each from the first deep page of its result set to its end. */
  seconds: number
}

const NAME = 'pagination_anchor_read_seconds'

export async function readAnchorReads (base: string): Promise<AnchorReads[]> {
  const reads = new Map<string, AnchorReads>()
  for (const { name, labels, value } of samples(await metricsText(base))) {
    if ((name !== `${NAME}_count` && name !== `${NAME}_sum`) || labels.table !== 'messages') continue
    const key = `${labels.sort}:${labels.outcome}`
    const read = reads.get(key) ?? { sort: labels.sort ?? '', outcome: labels.outcome ?? '', count: 0, seconds: 0 }
    if (name.endsWith('_count')) read.count += value
    else read.seconds += value
    reads.set(key, read)
  }
  return [...reads.values()].filter((read) => read.count > 0)
}

export function anchorReadLines (reads: readonly AnchorReads[] | undefined): string[] {
  if (reads === undefined || reads.length === 0) return []
  const lines = ['', 'Anchor reads of messages over the run (the service\'s `pagination_anchor_read_seconds`): until a read is complete, ' +
    'deep pages of its result set are located in the counters (`id`, `createdAt`) or wait for it (`subject`).', '',
  '| Sort | Outcome | Reads | Seconds each (mean) |', '|---|---|---:|---:|']
  for (const read of reads) lines.push(`| ${read.sort} | ${read.outcome} | ${read.count} | ${(read.seconds / read.count).toFixed(2)} |`)
  return lines
}
