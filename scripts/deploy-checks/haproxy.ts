import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { appendFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'

export type ServerState = 'UP' | 'DOWN'

export interface BalancerOptions {
  /** The HAProxy configuration file, run as it is. */
  config: string
  /** LB_BIND: where HAProxy listens. */
  bind: string
  /** API_1, API_2, ...: the instance addresses, in the order of the file's server lines. */
  servers: string[]
  logFile: string
}

export interface Retries {
  /** Requests HAProxy sent more than once. */
  retried: number
  /** Of those, the ones it sent to another instance than the first (`+` in the log's retry field). */
  redispatched: number
}

// option httplog: "... %ac/%fc/%bc/%sc/%rc %sq/%bq ..." where %rc, the retries, has a leading `+`
// when the request was redispatched to another server.
const RETRIES = / \d+\/\d+\/\d+\/\d+\/(\+?)(\d+) \d+\/\d+ /
// "Server api/api-2 is DOWN, reason: ..." and "Server api/api-2 is UP, reason: ...".
const STATE = /Server [\w-]+\/([\w-]+) is (UP|DOWN)\b/

export type LogEvent = { server: string, state: ServerState } | { retries: number, redispatched: boolean }

/** A request's retries from an `option httplog` line, or a server state change; null for other lines. */
export function parseLogLine (line: string): LogEvent | null {
  const retry = RETRIES.exec(line)
  if (retry !== null) return { retries: Number(retry[2]), redispatched: retry[1] === '+' }
  const change = STATE.exec(line)
  if (change !== null) return { server: change[1] ?? '', state: change[2] as ServerState }
  return null
}

export function haproxyVersion (): string | null {
  const result = spawnSync('haproxy', ['-v'], { encoding: 'utf8' })
  if (result.error !== undefined || result.status !== 0) return null
  return /version (\S+)/.exec(result.stdout)?.[1] ?? 'unknown'
}

/**
 * HAProxy in the foreground with the repository's configuration; only the addresses come from the
 * environment (LB_BIND, API_1...). Its log (stdout and stderr) is kept in a file and read for the
 * server state changes its health checks decide and for the retries of every request it proxied.
 */
export class Balancer {
  private readonly child: ChildProcess
  private readonly changes: Array<{ server: string, state: ServerState, at: number }> = []
  private readonly exited: Promise<void>
  readonly retries: Retries = { retried: 0, redispatched: 0 }

  constructor (options: BalancerOptions) {
    const env: NodeJS.ProcessEnv = { ...process.env, LB_BIND: options.bind }
    options.servers.forEach((address, i) => { env[`API_${i + 1}`] = address })
    this.child = spawn('haproxy', ['-db', '-f', options.config], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    this.exited = new Promise((resolve) => this.child.once('exit', () => resolve()))
    for (const stream of [this.child.stdout, this.child.stderr]) {
      if (stream === null) continue
      createInterface({ input: stream }).on('line', (line) => {
        appendFileSync(options.logFile, line + '\n')
        this.read(line)
      })
    }
  }

  private read (line: string): void {
    const event = parseLogLine(line)
    if (event === null) return
    if ('state' in event) {
      this.changes.push({ ...event, at: performance.now() })
      return
    }
    if (event.retries > 0) this.retries.retried++
    if (event.redispatched) this.retries.redispatched++
  }

  get running (): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /** Resolves with the time HAProxy marked `server` as `state` at or after `since` (performance.now()). */
  async marked (server: string, state: ServerState, since: number, timeoutMs: number): Promise<number> {
    const deadline = performance.now() + timeoutMs
    for (;;) {
      const change = this.changes.find((c) => c.server === server && c.state === state && c.at >= since)
      if (change !== undefined) return change.at
      if (!this.running) throw new Error('HAProxy exited')
      if (performance.now() > deadline) throw new Error(`HAProxy did not mark ${server} ${state} within ${timeoutMs} ms`)
      await sleep(20)
    }
  }

  /** Last resort, synchronous (a watchdog about to exit): nothing of the balancer outlives the check. */
  kill (): void {
    if (this.running) this.child.kill('SIGKILL')
  }

  async stop (): Promise<void> {
    if (!this.running) return
    this.child.kill('SIGTERM')
    await Promise.race([this.exited, sleep(5000)])
    if (this.running) this.child.kill('SIGKILL')
  }
}
