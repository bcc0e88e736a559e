import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, openSync, readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { SERVICE_NODE_ARGS } from '../service-args.js'

export interface Exit { code: number | null, signal: NodeJS.Signals | null }

export interface InstanceOptions {
  name: string
  /** The node binary the instance runs on. */
  node: string
  /** The compiled server, `dist/src/server.js`, started with the image's node flags. */
  script: string
  cwd: string
  port: number
  env: NodeJS.ProcessEnv
  /** Every process of this slot appends its output here. */
  logFile: string
}

/**
 * One API slot behind the balancer: a fixed loopback address whose process can be stopped and
 * replaced, as an orchestrator restarts a container under the same name.
 */
export class Instance {
  readonly name: string
  readonly base: string
  private child: ChildProcess | undefined
  private exit: Promise<Exit> = Promise.resolve({ code: null, signal: null })

  constructor (private readonly options: InstanceOptions) {
    this.name = options.name
    this.base = `http://127.0.0.1:${options.port}`
  }

  get running (): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null
  }

  /** Starts a new process in this slot and resolves once its /health/ready answers 200. */
  async start (timeoutMs: number): Promise<void> {
    const fd = openSync(this.options.logFile, 'a')
    const child = spawn(this.options.node, [...SERVICE_NODE_ARGS, this.options.script], {
      cwd: this.options.cwd,
      env: { ...this.options.env, HOST: '127.0.0.1', PORT: String(this.options.port) },
      stdio: ['ignore', fd, fd]
    })
    closeSync(fd)
    this.child = child
    this.exit = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline) {
      if (!this.running) throw new Error(`${this.name} exited during start-up:\n${this.logTail()}`)
      try {
        if ((await fetch(this.base + '/health/ready', { signal: AbortSignal.timeout(1000) })).ok) return
      } catch {}
      await sleep(100)
    }
    throw new Error(`${this.name} was not ready after ${timeoutMs} ms:\n${this.logTail()}`)
  }

  /** Sends `signal` to the current process and resolves with how it exited (null after timeoutMs). */
  async stop (signal: NodeJS.Signals, timeoutMs: number): Promise<Exit | null> {
    if (!this.running) return await this.exit
    this.child?.kill(signal)
    return await Promise.race([this.exit, sleep(timeoutMs, null)])
  }

  /** Last resort: nothing of this slot outlives the check. */
  kill (): void {
    if (this.running) this.child?.kill('SIGKILL')
  }

  logTail (lines = 15): string {
    try {
      return readFileSync(this.options.logFile, 'utf8').trim().split('\n').slice(-lines).join('\n')
    } catch {
      return ''
    }
  }
}
