import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { postgresDatabase } from '../helpers/database.js'
import { REST_OF_WINDOW, restOfWindow } from '../helpers/rate-limit.js'
import { LOADER_ARGS, LOADER_ENV } from '../helpers/server-process.js'

// CONTRACT 11, several instances: two real server processes start at the same moment on one fresh
// PostgreSQL database and share the rate limit through Redis. Redis is required: TEST_REDIS_URL,
// or the local server.
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const REDIS_URL = process.env.TEST_REDIS_URL === undefined || process.env.TEST_REDIS_URL === '' ? 'redis://127.0.0.1:6379' : process.env.TEST_REDIS_URL
const LIMIT = 10
const START_TIMEOUT_MS = 90_000

/** A fresh database on TEST_DATABASE_URL's server, or on a throwaway server of the machine's own. */
/** Starts `node src/server.ts` with the test's own loader and resolves with its address once it listens. */
async function startInstance (t: Test, env: Record<string, string>): Promise<string> {
  const child: ChildProcess = spawn(process.execPath, [...LOADER_ARGS, 'src/server.ts'], {
    cwd: ROOT,
    env: { ...LOADER_ENV, PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))])
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  let output = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`instance did not listen within ${START_TIMEOUT_MS} ms:\n${output}`)), START_TIMEOUT_MS)
    child.stderr?.on('data', (chunk: Buffer) => { output += chunk.toString() })
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      const listening = /"msg":"Server listening at (http:\/\/127\.0\.0\.1:\d+)"/.exec(output)
      if (listening?.[1] !== undefined) {
        clearTimeout(timer)
        resolve(listening[1])
      }
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`instance exited with ${code}:\n${output}`))
    })
  })
}

async function requireRedis (): Promise<Redis> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, enableOfflineQueue: false })
  redis.on('error', () => {})
  try {
    await redis.connect()
    await redis.ping()
  } catch (err) {
    redis.disconnect()
    throw new Error(`Redis at ${REDIS_URL} is unreachable (${(err as Error).message}); the shared rate-limit test needs it: start Redis or set TEST_REDIS_URL`)
  }
  return redis
}

t.test('two instances start at once on one fresh database and share the rate limit through Redis', async (t) => {
  const redis = await requireRedis()
  t.teardown(() => redis.disconnect())
  const databaseUrl = await postgresDatabase(t)

  // Each run is its own client behind the balancer (an address of the documentation range), so
  // counts never mix with another run's; its key is removed afterwards.
  const client = `2001:db8::${randomBytes(6).toString('hex').match(/.{4}/g)?.join(':') ?? '1'}`
  t.teardown(async () => { await redis.del(`messages-api-rl-ip:${client}`) })

  const env = {
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_URL: databaseUrl,
    REDIS_URL,
    RATE_LIMIT_MAX: String(LIMIT),
    TRUST_PROXY: '127.0.0.1',
    AUTH_ISSUER: 'http://127.0.0.1:9',
    LOG_LEVEL: 'info',
    // This test counts rate-limit answers; two processes starting at once on two cores can look
    // overloaded to the load shedder for a moment, which is another test's subject.
    MAX_EVENT_LOOP_DELAY_MS: '0'
  }
  const [first, second] = await Promise.all([startInstance(t, env), startInstance(t, env)])
  t.not(first, second, 'two processes, two addresses')

  for (const base of [first, second]) {
    const ready = await request(`${base}/health/ready`)
    t.same({ status: ready.statusCode, body: await ready.body.json() }, { status: 200, body: { ok: true } }, `${base} is ready`)
  }
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  t.teardown(() => sql.end())
  const journal = JSON.parse(await readFile(new URL('../../drizzle/meta/_journal.json', import.meta.url), 'utf8')) as { entries: unknown[] }
  const [{ n }] = await sql`select count(*)::int as n from drizzle.__drizzle_migrations` as unknown as [{ n: number }]
  t.equal(n, journal.entries.length, 'every migration applied exactly once')

  // Six requests to each, alternating: the shared count refuses the eleventh and twelfth.
  const statuses: number[] = []
  let refusal: { body: unknown, retryAfter: unknown } | undefined
  for (let i = 0; i < 6; i++) {
    for (const base of [first, second]) {
      const res = await request(`${base}/v2/movies?limit=1`, { headers: { 'x-forwarded-for': client } })
      const body: unknown = await res.body.json()
      statuses.push(res.statusCode)
      if (res.statusCode === 429) refusal = { body, retryAfter: res.headers['retry-after'] }
    }
  }
  t.same(statuses, [...Array(LIMIT).fill(200), 429, 429], 'the limit counts across both instances')
  t.same(refusal?.body, { error: 'Too many requests' })
  t.equal(restOfWindow(refusal?.retryAfter), REST_OF_WINDOW, `Retry-After is the rest of the shared window (${String(refusal?.retryAfter)})`)
  t.equal(await redis.get(`messages-api-rl-ip:${client}`), '12', 'one counter in Redis for the caller')
})
