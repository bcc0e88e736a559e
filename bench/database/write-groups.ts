/** How the service grouped a write row's creates, from the difference of its /metrics before and after the row. */
import { request } from 'undici'

export interface GroupTotals { groups: number, creates: number, waitSeconds: number, statementSeconds: number }

/** The grouped-insert histograms' counts and sums (plugins/metrics.ts), or undefined when /metrics does not answer. */
export async function groupTotals (base: string): Promise<GroupTotals | undefined> {
  try {
    const response = await request(`${base}/metrics`, { headersTimeout: 5000, bodyTimeout: 5000 })
    const text = await response.body.text()
    if (response.statusCode !== 200) return undefined
    const value = (name: string) => Number(/^(\S+) (\S+)$/m.exec(text.split('\n').find((line) => line.startsWith(`${name} `)) ?? '')?.[2] ?? NaN)
    return {
      groups: value('message_write_group_size_count'),
      creates: value('message_write_group_size_sum'),
      waitSeconds: value('message_write_group_wait_seconds_sum'),
      statementSeconds: value('message_write_group_statement_seconds_sum')
    }
  } catch {
    return undefined
  }
}

/** Mean group size, mean wait of a group's oldest create and mean statement time over a row, in ms. */
export interface GroupSummary { groups: number, meanSize: number, meanWaitMs: number, meanStatementMs: number }

export function summarize (before: GroupTotals | undefined, after: GroupTotals | undefined): GroupSummary | undefined {
  if (before === undefined || after === undefined) return undefined
  const groups = after.groups - before.groups
  if (!(groups > 0)) return undefined
  return {
    groups,
    meanSize: (after.creates - before.creates) / groups,
    meanWaitMs: (after.waitSeconds - before.waitSeconds) / groups * 1000,
    meanStatementMs: (after.statementSeconds - before.statementSeconds) / groups * 1000
  }
}
