import { relative } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { seedDatabase } from '../seed.js'
import type { LiveResult } from './live-clients.js'
import type { Answer, LoadResult, Phase } from './load.js'
import { checkArgs, exitWith, runCheck, startTraffic, type CheckContext, type CheckOutcome } from './run.js'
import { ROOT, nodeVersion, startStack, type Stack } from './stack.js'
import { verify, type Verification } from './verify.js'

// A deploy check's scenario, from seed to report, written once for the rolling-restart and failover
// checks: the command line; the scenario's database, seeded; the instances behind HAProxy; the mixed
// load and the live clients through it, warmed up; then what the scenario does under that load; the
// traffic stopped, every acknowledged write verified, and the table with its verdicts. A scenario
// file (scripts/rolling-restart/main.ts, scripts/failover/main.ts) holds only what differs: where
// its database lives, what it does under load, and what its report adds.

const WORKERS = 16
/** Bearer tokens signed for the load's callers. */
const TOKENS = 8
export const START_TIMEOUT_MS = 60_000
// The instances' SHUTDOWN_GRACE_MS is the default 10 s; an orchestrator waits longer before SIGKILL.
export const STOP_TIMEOUT_MS = 15_000
const WARMUP_MS = 3000
// After the load stops, how long the live clients have to hold exactly the table: well past one
// long-poll's wait (20 s), though a live delivery takes well under a second.
const LIVE_SETTLE_MS = 30_000
/** Ids the reads ask for, sampled from the seeded table. */
const READ_IDS = 5000

/** Where a scenario's data lives. */
export interface ScenarioDatabase {
  /** Where the seed writes, and where the ids the reads ask for are sampled. */
  seedUrl: string
  /** The DATABASE_URL the instances get. */
  serviceUrl: string
  /** Where the table is read once the load has stopped: the live clients' copies and the writes are checked against it. */
  finalUrl: string
  /** Run once the seed is in, before the instances start. */
  seeded?: () => Promise<void>
}

/** What every scenario's report holds. */
export interface SharedReport {
  node: string
  haproxy: string
  config: string
  messages: number
  rate: number
  load: LoadResult
  live: LiveResult
  verification: Verification
}

/** The scenario's view of the running stack and its traffic. */
export interface UnderLoad {
  stack: Stack
  /** Moves the traffic to another phase: answers, samples and failures are counted by the phase they were sent in. */
  setPhase: (phase: Phase) => void
  say: (line: string) => void
}

export interface Scenario<Database extends ScenarioDatabase, Run> {
  /** Names the log lines, the work folder and the callers. */
  name: string
  usage: string
  defaults: { messages: number, live: number }
  instances: number
  /** Prefix of the load's Idempotency-Keys, so that a run's keys are its own. */
  keyPrefix: string
  /** Everything, seeding included, is over well within this; past it the check stops and fails. */
  watchdogMs: number
  /** Keep every answer after the warm-up (each POST attempt included) for the report. */
  keepAnswers?: boolean
  /** Creates the scenario's database; what it starts is stopped through context.onEnd. */
  database: (context: CheckContext, say: (line: string) => void) => Promise<Database>
  /** What the scenario does under load, after the warm-up; what it returns goes to its report. */
  underLoad: (scene: UnderLoad, database: Database) => Promise<Run>
  /** The table and the names of the verdicts that do not hold. */
  report: (shared: SharedReport, run: Run, context: { database: Database, stack: Stack, answers: Answer[] }) => Promise<CheckOutcome>
}

/** Ids for the reads to ask for, and the highest id the seed wrote: the writes after it are the load's. */
async function sampleSeed (url: string): Promise<{ ids: number[], seededMaxId: number }> {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    const ids = (await sql<Array<{ id: number }>>`SELECT id::float8 AS id FROM messages ORDER BY random() LIMIT ${READ_IDS}`).map((r) => r.id)
    const [{ seededMaxId } = { seededMaxId: 0 }] = await sql<Array<{ seededMaxId: number }>>`SELECT coalesce(max(id), 0)::float8 AS "seededMaxId" FROM messages`
    return { ids, seededMaxId }
  } finally {
    await sql.end()
  }
}

/** Runs a scenario as a command: parses process.argv, runs it, and sets the exit code. */
export async function runScenario<Database extends ScenarioDatabase, Run> (scenario: Scenario<Database, Run>): Promise<void> {
  const say = (line: string): boolean => process.stderr.write(`${scenario.name}: ${line}\n`)
  await exitWith(say, async () => {
    const args = checkArgs(process.argv.slice(2), scenario.usage, scenario.defaults)
    if (args === undefined) return 0
    return await runCheck({ name: scenario.name, args, watchdogMs: scenario.watchdogMs, stopTimeoutMs: STOP_TIMEOUT_MS, say }, async (context) => {
      const database = await scenario.database(context, say)
      say(`seeding ${args.messages} messages`)
      await seedDatabase({ url: database.seedUrl, messages: args.messages, users: 100, ifEmpty: false, quiet: true })
      const { ids, seededMaxId } = await sampleSeed(database.seedUrl)
      await database.seeded?.()

      const node = nodeVersion(args.node)
      say(`starting ${scenario.instances} instances on ${node}`)
      const stack = await startStack({
        node: args.node,
        config: args.config,
        databaseUrl: database.serviceUrl,
        instances: scenario.instances,
        work: context.work,
        startTimeoutMs: START_TIMEOUT_MS,
        tokens: TOKENS,
        subject: scenario.name
      }, context.started)

      let phase: Phase = 'warmup'
      const answers: Answer[] = []
      const traffic = await startTraffic({
        base: stack.base,
        tokens: stack.tokens,
        ids,
        rate: args.rate,
        workers: WORKERS,
        live: args.live,
        keyPrefix: `${scenario.keyPrefix}-${Date.now().toString(36)}`,
        phase: () => phase,
        onAnswer: scenario.keepAnswers === true ? (answer) => { if (answer.phase !== 'warmup') answers.push(answer) } : undefined,
        say
      })
      context.traffic = traffic
      await sleep(WARMUP_MS)

      const run = await scenario.underLoad({ stack, setPhase: (next) => { phase = next }, say }, database)

      const { load, live } = await traffic.stop(database.finalUrl, LIVE_SETTLE_MS)
      const shared: SharedReport = {
        node,
        haproxy: args.haproxy,
        config: args.config.startsWith(ROOT) ? relative(ROOT, args.config) : args.config,
        messages: args.messages,
        rate: args.rate,
        load,
        live,
        verification: await verify(database.finalUrl, seededMaxId, load)
      }
      return await scenario.report(shared, run, { database, stack, answers })
    })
  })
}
