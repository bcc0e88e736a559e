/**
 * The live load client (client.ts) as the benchmark drives it: started as a process of its own, compiled
 * (dist/bench/live/client.js, built with the servers), through bash to raise its open-file limit to the
 * hard limit first; then one request at a time over its IPC channel.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { BenchError } from '../run/bench-error.js'
import { ROOT } from '../run/locations.js'
import type { CommittedWrite, FromClient, ToClient } from './protocol.js'

// Far beyond any row: the client exits by itself if the benchmark forgets it.
const CLIENT_LIFETIME_S = 1800
const ANSWER_TIMEOUT_MS = 300_000

const started = new Set<ChildProcess>()

/** The hard limit of open files a process started here may raise itself to. */
export function hardFileLimit (): number {
  const out = spawnSync('bash', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).stdout.trim()
  return out === 'unlimited' ? Infinity : Number(out)
}

/** `node <args>` through bash, with the soft limit of open files raised to the hard one. */
export function raisedLimitCommand (args: readonly string[]): { command: string, args: string[] } {
  return { command: 'bash', args: ['-c', 'ulimit -n "$(ulimit -Hn)" && exec "$0" "$@"', process.execPath, ...args] }
}

type Answer<K extends FromClient['kind']> = Extract<FromClient, { kind: K }>

export interface Fleet {
  pid: number
  open: (message: Omit<Extract<ToClient, { kind: 'open' }>, 'kind'>) => Promise<Answer<'opened'>>
  commits: (ids: number[], times: number[]) => void
  window: () => Promise<Answer<'window'>>
  finish: (writes: CommittedWrite[], drainMs: number) => Promise<Answer<'finished'>>
  close: () => Promise<Answer<'closed'>>
  stop: () => Promise<void>
}

/** Kills every load client still running (cleanup on an error or a signal). */
export function stopFleets (): void {
  for (const child of started) child.kill('SIGKILL')
  started.clear()
}

export async function startFleet (connections: number): Promise<Fleet> {
  const limit = hardFileLimit()
  if (limit < connections + 200) throw new BenchError(`${connections} live clients need ${connections + 200} open files; the hard limit (ulimit -Hn) is ${limit}`)
  const { command, args } = raisedLimitCommand([join(ROOT, 'dist', 'bench', 'live', 'client.js')])
  const child = spawn(command, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: { ...process.env, LIVE_CLIENT_LIFETIME_S: String(CLIENT_LIFETIME_S) } })
  started.add(child)
  const waiting = new Map<string, (message: FromClient) => void>()
  let exited: string | undefined
  child.on('message', (message: FromClient) => {
    const resolve = waiting.get(message.kind)
    waiting.delete(message.kind)
    resolve?.(message)
  })
  child.on('exit', (code, signal) => {
    started.delete(child)
    exited = `the live load client exited (${signal ?? code ?? 'unknown'})`
    for (const resolve of waiting.values()) resolve({ kind: 'closed', reconnects: 0, errors: [exited], errorCount: 1 })
    waiting.clear()
  })
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', () => resolve())
    child.once('error', reject)
  })
  const ask = async <K extends FromClient['kind']>(kind: K, message: ToClient): Promise<Answer<K>> => {
    if (exited !== undefined) throw new BenchError(exited)
    const answer = new Promise<FromClient>((resolve, reject) => {
      const timer = setTimeout(() => reject(new BenchError(`the live load client did not answer "${message.kind}" within ${ANSWER_TIMEOUT_MS / 1000} s`)), ANSWER_TIMEOUT_MS)
      waiting.set(kind, (m) => { clearTimeout(timer); resolve(m) })
    })
    child.send(message)
    const got = await answer
    if (got.kind !== kind) throw new BenchError(got.kind === 'closed' ? got.errors.join('; ') : `the live load client answered ${got.kind}`)
    return got as Answer<K>
  }
  return {
    pid: child.pid!,
    open: async (message) => await ask('opened', { kind: 'open', ...message }),
    commits: (ids, times) => { if (exited === undefined && child.connected) child.send({ kind: 'commits', ids, times }) },
    window: async () => await ask('window', { kind: 'window' }),
    finish: async (writes, drainMs) => await ask('finished', { kind: 'finish', writes, drainMs }),
    close: async () => await ask('closed', { kind: 'close' }),
    async stop () {
      if (exited !== undefined) return
      const gone = new Promise((resolve) => child.once('exit', resolve))
      child.disconnect()
      await Promise.race([gone, new Promise((resolve) => setTimeout(resolve, 3000))])
      if (exited === undefined) child.kill('SIGKILL')
    }
  }
}
