import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { haproxyVersion } from './haproxy.js'
import { initialCopy, startLiveClients } from './live-clients.js'
import { startLoad, type Answer, type LoadResult, type Phase } from './load.js'
import { CheckError, ROOT, killStarted, positive, type Started } from './stack.js'

// How a deploy check runs, for the rolling-restart and failover checks alike: its command line, its
// work folder and watchdog, the traffic it puts through HAProxy, the table it prints and the exit
// code it gives, and everything it started stopped however it ends.

export interface CheckArgs {
  /** The node binary the instances run on. */
  node: string
  /** The HAProxy configuration. */
  config: string
  messages: number
  rate: number
  /** Live clients of each kind. */
  live: number
  out: string | undefined
  keepLogs: boolean
  /** HAProxy's version line. */
  haproxy: string
}

/** The options both checks take (USAGE lists them); undefined once --help has been answered. */
export function checkArgs (args: string[], usage: string, defaults: { messages: number, live: number }): CheckArgs | undefined {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      node: { type: 'string' },
      config: { type: 'string' },
      messages: { type: 'string' },
      rate: { type: 'string' },
      live: { type: 'string' },
      out: { type: 'string' },
      'keep-logs': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' }
    }
  })
  if (values.help === true) {
    process.stdout.write(usage)
    return undefined
  }
  const haproxy = haproxyVersion()
  if (haproxy === null) throw new CheckError('HAProxy is not installed (Debian: apt-get install haproxy)')
  return {
    node: values.node ?? process.execPath,
    config: values.config ?? join(ROOT, 'deploy/haproxy.cfg'),
    messages: positive('messages', values.messages, defaults.messages),
    rate: positive('rate', values.rate, 100),
    live: positive('live', values.live, defaults.live),
    out: values.out,
    keepLogs: values['keep-logs'] === true,
    haproxy
  }
}

export interface TrafficOptions {
  base: string
  tokens: string[]
  /** Ids the reads ask for. */
  ids: number[]
  rate: number
  workers: number
  /** Live clients of each kind. */
  live: number
  keyPrefix: string
  phase: () => Phase
  onAnswer?: (answer: Answer) => void
  say: (line: string) => void
}

export interface Traffic {
  /** Stops the load, then waits (up to settleMs) for the live clients to hold the table at databaseUrl. */
  stop: (databaseUrl: string, settleMs: number) => Promise<{ load: LoadResult, live: Awaited<ReturnType<ReturnType<typeof startLiveClients>['stop']>> }>
  /** Stops whatever still runs; for a check that ends early. */
  close: () => Promise<void>
}

/**
 * The live clients of the change feed (one of each kind loading its own initial copy, the others
 * starting from one shared copy), then the mixed load, both through HAProxy.
 */
export async function startTraffic (options: TrafficOptions): Promise<Traffic> {
  const { base, say } = options
  const start = await initialCopy(base)
  say(`live: ${options.live} SSE and ${options.live} long-poll clients through HAProxy`)
  const live = startLiveClients({ base, sse: options.live, longPolls: options.live, fromScratch: 1, phase: options.phase, start })
  await live.ready
  say(`load: ${options.rate} requests/s from ${options.workers} connections through HAProxy`)
  const load = startLoad({
    base,
    rate: options.rate,
    workers: options.workers,
    tokens: options.tokens,
    ids: options.ids,
    keyPrefix: options.keyPrefix,
    phase: options.phase,
    onCreated: live.created,
    onAnswer: options.onAnswer
  })
  let loadStopped: Promise<LoadResult> | undefined
  let liveStopped = false
  return {
    async stop (databaseUrl, settleMs) {
      const result = await (loadStopped ??= load.stop())
      say('load stopped; waiting for the live clients to hold the table')
      liveStopped = true
      return { load: result, live: await live.stop(databaseUrl, settleMs) }
    },
    async close () {
      await (loadStopped ??= load.stop()).catch(() => {})
      if (!liveStopped) await live.close().catch(() => {})
    }
  }
}

export interface CheckContext {
  /** The check's folder: the identity provider's keys and every log, kept when the check fails. */
  work: string
  /** What the stack has started: stopped when the check ends, killed by the watchdog. */
  started: Started
  /** Its traffic, closed first when the check ends. */
  traffic?: Traffic
  /** Run after the stack has stopped, however the check ends, last registered first. */
  onEnd: (task: () => Promise<unknown>) => void
}

export interface CheckOutcome {
  table: string
  /** The names of the verdicts that do not hold. */
  failed: string[]
}

export interface RunOptions {
  name: string
  args: CheckArgs
  watchdogMs: number
  stopTimeoutMs: number
  say: (line: string) => void
}

/**
 * Runs a check's body with a work folder, a watchdog and SIGINT/SIGTERM handled; prints its table
 * (and writes it to --out); answers 1 unless every verdict holds. Everything started is stopped
 * whatever happens, and the logs are kept when the check fails or --keep-logs asks.
 */
export async function runCheck (options: RunOptions, body: (context: CheckContext) => Promise<CheckOutcome>): Promise<number> {
  const { say, args } = options
  const work = mkdtempSync(join(tmpdir(), `${options.name}-`))
  const ended: Array<() => Promise<unknown>> = []
  const context: CheckContext = { work, started: { instances: [] }, onEnd: (task) => { ended.push(task) } }
  let keep = args.keepLogs
  // process.exit runs the exit hooks of what was started (a throwaway cluster stops and goes).
  const abandon = (why: string, code: number): void => {
    say(why)
    killStarted(context.started)
    process.exit(code)
  }
  const watchdog = setTimeout(() => { abandon(`not finished after ${options.watchdogMs / 1000} s; stopping (logs in ${work})`, 1) }, options.watchdogMs)
  watchdog.unref()
  const onSignal = (signal: NodeJS.Signals): void => { abandon(`${signal}; stopping`, 130) }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  try {
    const { table, failed } = await body(context)
    process.stdout.write(table + '\n')
    if (args.out !== undefined) writeFileSync(args.out, table + '\n')
    if (failed.length > 0) {
      keep = true
      say(`FAILED: ${failed.join('; ')} (logs kept in ${work})`)
      return 1
    }
    say(keep ? `passed (logs kept in ${work})` : 'passed')
    return 0
  } catch (err) {
    keep = true
    say(`${(err as Error).message} (logs kept in ${work})`)
    return 1
  } finally {
    clearTimeout(watchdog)
    await context.traffic?.close()
    await context.started.stop?.(options.stopTimeoutMs)
    for (const task of ended.reverse()) await task().catch((err: Error) => { say(`cleanup failed: ${err.message}`) })
    process.removeListener('SIGINT', onSignal)
    process.removeListener('SIGTERM', onSignal)
    if (!keep) rmSync(work, { recursive: true, force: true })
  }
}

/** Sets the process's exit code from a check's main; a mistake on the command line is one line. */
export async function exitWith (say: (line: string) => void, main: () => Promise<number>): Promise<void> {
  try {
    process.exitCode = await main()
  } catch (err) {
    if (!(err instanceof CheckError) && !(err instanceof TypeError)) throw err
    say(err.message)
    process.exitCode = 1
  }
}
