/**
 * `npm run bench`: the load benchmark (docs/performance.md). Seeds the database when needed, starts the
 * servers, measures every row against each of them, and writes the results to bench/results/. With
 * --target, it measures a deployment it did not start instead (./run/target-run.ts, docs/performance.md).
 */
import { mkdirSync } from 'node:fs'
import { createTokens, type Tokens } from './run/caller-tokens.js'
import { messageCount, oracleAnswers, type DeferredWrites } from './checks/answer-checks.js'
import { failureText, helpText, parseOptions, type BenchOptions } from './run/command-line.js'
import { bulkInsertCost, serverCpu } from './database/cpu-per-write.js'
import { measureSeekFloor, SEEK_FLOOR_KEY } from './database/seek-floor.js'
import { readAnchorReads } from './report/anchor-reads.js'
import { openOracle, prepareDatabase } from './database/seed-and-open.js'
import { runLive, wantsLive } from './live/section.js'
import { RESULTS_DIR } from './run/locations.js'
import type { RunSettings } from './run/measure-row.js'
import type { Oracle } from './checks/reference-sql.js'
import type { BenchReport } from './report/bench-report.js'
import { checkDeferred, describeMachine, failed, RSS_LIMIT_MB, writeResults } from './report/write-results.js'
import { buildRows } from './rows/index.js'
import { runRows, warmUp } from './run/run-rows.js'
import { runTarget } from './run/target-run.js'
import { cleanup, handleSignals, isStopping, startIdentityProvider, startServers, type Identity } from './servers/child-servers.js'

/** Starts the servers, measures the rows and writes the results; returns the exit code. */
async function run (options: BenchOptions, identity: Identity, tokens: Tokens, oracle: Oracle, seed: BenchReport['seed']): Promise<number> {
  const machine = describeMachine(oracle)
  const servers = await startServers({ ...options, identity })
  const rows = (await buildRows({ oracle, answers: oracleAnswers(oracle), keys: options.keys, tokens, service: servers.service, maxRequests: options.maxRequests }))
    .map((row) => ({ ...row, targets: row.targets.filter((target) => servers[target] !== undefined) }))
  const deferred: DeferredWrites[] = []
  const databaseCpu = await serverCpu(oracle)
  const settings: RunSettings = { duration: options.duration, connections: options.connections, maxRequests: options.maxRequests, oracle, deferred, databaseCpu, shedFails: true }
  await warmUp(servers)
  const { reports, sync } = await runRows(rows, servers, settings, tokens, options.keys.has('sync'))
  const anchorReads = await readAnchorReads(servers.service.base)
  // The floor of the cold rows, right after them: PostgreSQL's own keyset seek of a page, with the servers idle.
  const seekFloor = !options.embedded && options.keys.has(SEEK_FLOOR_KEY) ? await measureSeekFloor(oracle, options.databaseUrl, options.duration) : undefined
  // The write rows' reference, measured in the same run: what a created message costs in one large statement.
  // The write profile (bench/write-profile/) turns it off: its statistics must hold the row's statements alone.
  const bulkInsert = databaseCpu !== undefined && process.env.BENCH_INSERT_REFERENCE !== 'off' && reports.some((row) => row.results.service?.databaseUsPerWrite !== undefined)
    ? await bulkInsertCost(oracle, databaseCpu)
    : undefined
  // Live delivery last: its rows write, and hold thousands of connections the rows before must not share.
  const live = wantsLive(options.keys)
    ? await runLive({ keys: options.keys, service: servers.service, oracle, tokens, server: { ...options, identity }, seconds: options.duration, connections: options.connections })
    : undefined
  const messagesAtEnd = await messageCount(oracle, servers.service.base)
  const databaseBytes = await oracle.bytes()
  await checkDeferred(deferred, reports)
  const report: BenchReport = {
    date: new Date().toISOString(),
    machine,
    messages: messagesAtEnd,
    size: options.messages,
    seed,
    databaseBytes,
    durationSeconds: options.duration,
    connections: options.connections,
    rssLimitMb: options.embedded ? undefined : RSS_LIMIT_MB,
    rows: reports,
    sync,
    live,
    bulkInsert,
    seekFloor,
    anchorReads
  }
  // The embedded run has results of its own: it is a different database, not a later run of the same one.
  writeResults(report, options.outName)
  return failed(report) ? 1 : 0
}

async function main (args: string[]): Promise<number> {
  const options = parseOptions(args)
  if (options === undefined) {
    process.stdout.write(helpText())
    return 0
  }
  mkdirSync(RESULTS_DIR, { recursive: true })
  if (options.target !== undefined) return await runTarget(options, options.target)
  const seed = await prepareDatabase(options)
  const identity = await startIdentityProvider(process.env.API_AUDIENCE ?? 'backend-3-messages')
  const tokens = await createTokens(identity)
  const oracle = await openOracle(options)
  try {
    return await run(options, identity, tokens, oracle, seed)
  } finally {
    await oracle.close()
  }
}

handleSignals()
try {
  process.exitCode = await main(process.argv.slice(2))
} catch (err) {
  // After a signal, failures are the interruption itself; the handler reports and exits.
  if (!isStopping()) process.stderr.write(failureText(err))
  process.exitCode = isStopping() ? 130 : 1
} finally {
  await cleanup()
}
