/**
 * `npm run bench -- --target <url>`: the rows against a deployment the benchmark did not start. Nothing is
 * seeded or started; the rows whose needs the target cannot meet (ROW_NEEDS) are reported as skipped.
 */
import { request } from 'undici'
import { statedAnswers, statedTotal } from '../checks/answer-checks.js'
import { describeMachine, failed, writeResults } from '../report/write-results.js'
import type { BenchReport, RowReport } from '../report/bench-report.js'
import { buildRows, unmetNeed, type Need } from '../rows/index.js'
import type { Server } from '../servers/child-servers.js'
import { BenchError } from './bench-error.js'
import { fileTokens, idpTokens, type Tokens } from './caller-tokens.js'
import type { BenchOptions, TargetPlan } from './command-line.js'
import { runRows, warmUp } from './run-rows.js'

/** The target answers GET /health with 200 within a few seconds, or the run stops before it starts. */
async function checkReachable (target: Server): Promise<void> {
  try {
    const response = await request(target.base + target.health, { signal: AbortSignal.timeout(10_000) })
    await response.body.dump()
    if (response.statusCode !== 200) throw new BenchError(`${target.base}${target.health} answered ${response.statusCode}`)
  } catch (err) {
    if (err instanceof BenchError) throw err
    throw new BenchError(`the target ${target.base} did not answer GET ${target.health}: ${(err as Error).message}`)
  }
}

/** The tokens of the run: from the file, or minted by the deployment's identity provider, or none. */
async function targetTokens (plan: TargetPlan): Promise<Tokens | undefined> {
  if (plan.tokenFile !== undefined) return await fileTokens(plan.tokenFile)
  if (plan.idp !== undefined) return await idpTokens(plan.idp)
  return undefined
}

/** Stands in for the tokens when there are none: the rows that call as a user are skipped, so nothing reads it. */
const NO_TOKENS: Tokens = {
  hello: '',
  post: async () => { throw new BenchError('no tokens: give --token-file or --idp') },
  peerPost: async () => { throw new BenchError('no tokens: give --token-file or --idp') }
}

export async function runTarget (options: BenchOptions, plan: TargetPlan): Promise<number> {
  const target: Server = { name: 'service', base: plan.url, health: '/health' }
  await checkReachable(target)
  const tokens = await targetTokens(plan)
  const met = new Set<Need>([...(tokens === undefined ? [] : ['token' as const]), ...(plan.allowWrites ? ['writes' as const] : [])])
  const skipped: RowReport[] = []
  const keys = new Set<string>()
  for (const key of options.keys) {
    const why = unmetNeed(key, met)
    if (why === undefined) keys.add(key)
    else skipped.push({ key, name: key, results: {}, skipped: why })
  }
  const rows = (await buildRows({ answers: statedAnswers(target.base), keys, tokens: tokens ?? NO_TOKENS, service: target, maxRequests: options.maxRequests }))
    .map((row) => ({ ...row, targets: row.targets.filter((t) => t === 'service') }))
  process.stdout.write(`bench: target ${target.base}: ${rows.length} rows, ${skipped.length} skipped (${skipped.map((r) => r.key).join(', ') || 'none'})\n`)
  await warmUp({ service: target })
  const { reports } = await runRows(rows, { service: target }, { duration: options.duration, connections: options.connections, maxRequests: options.maxRequests, deferred: [], shedFails: false }, tokens ?? NO_TOKENS, false)
  const report: BenchReport = {
    date: new Date().toISOString(),
    machine: describeMachine({ label: 'the target\'s database (not read here)' }),
    messages: await statedTotal(target.base),
    durationSeconds: options.duration,
    connections: options.connections,
    rssLimitMb: undefined,
    rows: [...reports, ...skipped],
    target: { url: target.base, tokens: plan.tokenFile !== undefined ? 'file' : plan.idp !== undefined ? 'idp' : 'none', writes: plan.allowWrites }
  }
  writeResults(report, options.outName)
  return failed(report) ? 1 : 0
}
