/** How the service grouped a write row's creates, from the difference of its /metrics before and after the row. */
import { metricsText, sums } from '../servers/service-metrics.js'

export interface GroupTotals { groups: number, creates: number, waitSeconds: number, statementSeconds: number }

const NAMES = ['message_write_group_size_count', 'message_write_group_size_sum', 'message_write_group_wait_seconds_sum', 'message_write_group_statement_seconds_sum']

/** The grouped-insert histograms' counts and sums (plugins/metrics.ts), or undefined when /metrics does not answer. */
export async function groupTotals (base: string): Promise<GroupTotals | undefined> {
  let text: string
  try {
    text = await metricsText(base)
  } catch {
    return undefined
  }
  const found = sums(text, NAMES)
  const value = (name: string): number => found.get(name) ?? Number.NaN
  return {
    groups: value('message_write_group_size_count'),
    creates: value('message_write_group_size_sum'),
    waitSeconds: value('message_write_group_wait_seconds_sum'),
    statementSeconds: value('message_write_group_statement_seconds_sum')
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
