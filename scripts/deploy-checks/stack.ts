import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { buildDevIdp, createTokenSigner, loadOrCreateKeys } from '../../src/dev-idp/app.js'
import { freePort } from '../free-port.js'
import { Balancer } from './haproxy.js'
import { Instance, type Exit } from './instance.js'

// What the rolling-restart and failover checks share: the compiled instances behind HAProxy running
// deploy/haproxy.cfg, the development identity provider that signs their callers' tokens, and the
// small helpers of their command lines.

export const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const AUDIENCE = 'backend-3-messages'

export class CheckError extends Error {}

export function describeExit (exit: Exit | null): string {
  if (exit === null) return 'still running'
  return exit.signal !== null ? `killed by ${exit.signal}` : `exit ${String(exit.code)}`
}

export function positive (name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback
  const n = Number(value)
  if (!Number.isInteger(n) || n <= 0) throw new CheckError(`--${name} must be a positive integer`)
  return n
}

export function nodeVersion (node: string): string {
  return execFileSync(node, ['--version'], { encoding: 'utf8' }).trim()
}

export interface StackOptions {
  /** The node binary the instances run on. */
  node: string
  /** The HAProxy configuration, run as it is. */
  config: string
  databaseUrl: string
  /**
   * How many instances, at most the configuration's server lines (three). With fewer, the lines
   * left name compose.yaml's hosts (api-3...), which do not resolve here: HAProxy disables them.
   */
  instances: number
  /** Folder of the identity provider's keys and of every log. */
  work: string
  startTimeoutMs: number
  /** Bearer tokens to sign for the load's callers. */
  tokens: number
  /** Their subjects are `${subject}-${i}`. */
  subject: string
}

export interface Stack {
  /** HAProxy's address. */
  base: string
  tokens: string[]
  instances: Instance[]
  balancer: Balancer
  /** Stops everything it started, instances first; safe to call on a half-started stack. */
  stop: (stopTimeoutMs: number) => Promise<void>
}

/** What a stack has started so far, filled in as it starts: a check's cleanup and watchdog use it. */
export interface Started {
  instances: Instance[]
  balancer?: Balancer
  /** Stops what has started (instances by SIGTERM, SIGKILL after stopTimeoutMs). */
  stop?: (stopTimeoutMs: number) => Promise<void>
}

/** For a watchdog about to exit: SIGKILL to every instance and to HAProxy, at once. */
export function killStarted (started: Started): void {
  for (const instance of started.instances) instance.kill()
  started.balancer?.kill()
}

/**
 * Starts the identity provider, the instances (each ready) and HAProxy in front of them, all on
 * loopback, and resolves once HAProxy answers /health/ready. `started` is filled in as each part
 * starts, so that the caller can stop or kill what runs whatever happens next.
 */
export async function startStack (options: StackOptions, started: Started): Promise<Stack> {
  // Filled in as they start: `stop` closes what there is.
  const parts: { idp?: FastifyInstance, balancer?: Balancer } = {}
  const instances = started.instances
  const stop = async (stopTimeoutMs: number): Promise<void> => {
    await Promise.all(instances.map(async (instance) => {
      if ((await instance.stop('SIGTERM', stopTimeoutMs)) === null) instance.kill()
    }))
    await parts.balancer?.stop()
    await parts.idp?.close()
  }
  started.stop = stop

  const idpPort = await freePort()
  const issuer = `http://127.0.0.1:${idpPort}`
  const keysDir = join(options.work, 'idp')
  const idp = await buildDevIdp({ issuer, audience: AUDIENCE, dataDir: keysDir })
  parts.idp = idp
  await idp.listen({ host: '127.0.0.1', port: idpPort })
  const sign = createTokenSigner(await loadOrCreateKeys(keysDir), { issuer, audience: AUDIENCE })
  const tokens = await Promise.all(Array.from({ length: options.tokens }, async (_, i) => (await sign({ sub: `${options.subject}-${i}`, role: 'User' })).accessToken))

  // What compose.yaml gives each instance, on loopback; the one difference is a rate limit no
  // single test client reaches (all of its requests come from one address).
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    NODE_ENV: 'production',
    AUTH_ISSUER: issuer,
    API_AUDIENCE: AUDIENCE,
    DATABASE_URL: options.databaseUrl,
    TRUST_PROXY: '127.0.0.1',
    RATE_LIMIT_MAX: '1000000'
  }
  for (let i = 1; i <= options.instances; i++) {
    instances.push(new Instance({ name: `api-${i}`, node: options.node, script: join(ROOT, 'dist/src/server.js'), cwd: options.work, port: await freePort(), env, logFile: join(options.work, `api-${i}.log`) }))
  }
  await Promise.all(instances.map(async (instance) => await instance.start(options.startTimeoutMs)))

  const lbPort = await freePort()
  const balancer = new Balancer({ config: options.config, bind: `127.0.0.1:${lbPort}`, servers: instances.map((i) => i.base.replace('http://', '')), logFile: join(options.work, 'haproxy.log') })
  parts.balancer = balancer
  started.balancer = balancer
  const base = `http://127.0.0.1:${lbPort}`
  for (let deadline = Date.now() + 10_000; ;) {
    try { if ((await fetch(base + '/health/ready')).ok) break } catch {}
    if (Date.now() > deadline) throw new CheckError('HAProxy did not answer within 10 s')
    await sleep(100)
  }
  return { base, tokens, instances, balancer, stop }
}
