import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import { ConfigError, loadConfig } from '../../src/config.js'
import { LOADER_ARGS, LOADER_ENV } from '../helpers/server-process.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** The ConfigError loadConfig throws for `env`, or a failure when it does not throw one. */
function configError (t: Test, env: Record<string, string>): string {
  try {
    loadConfig(env)
  } catch (err) {
    t.ok(err instanceof ConfigError, 'a ConfigError')
    const message = (err as Error).message
    t.notOk(message.includes('\n'), 'one line')
    return message
  }
  t.fail(`loadConfig(${JSON.stringify(env)}) did not throw`)
  return ''
}

t.test('CONTRACT 2: the defaults', async (t) => {
  t.same(loadConfig({}), {
    port: 3001,
    host: '0.0.0.0',
    authIssuer: 'http://localhost:3002',
    devIdp: true,
    apiAudience: 'backend-3-messages',
    jwksMaxAgeS: 600,
    databaseUrl: undefined,
    databasePoolSize: 10,
    databaseStatementTimeoutMs: 10000,
    weatherApiKey: undefined,
    weatherApiUrl: 'https://api.openweathermap.org/data/2.5/weather',
    development: false,
    production: false,
    logLevel: 'info',
    logFormat: undefined,
    rateLimitMax: 6000,
    redisUrl: undefined,
    databaseReadUrls: [],
    trustProxy: undefined,
    metricsToken: undefined,
    maxEventLoopDelayMs: 1000,
    shutdownGraceMs: 10000,
    corsOrigins: undefined,
    idempotencyTtlHours: 24,
    syncRetentionHours: 720,
    liveMaxConnections: 10000,
    liveMaxPerClient: 100,
    liveMaxBufferBytes: 1048576,
    liveHeartbeatS: 15,
    liveStallS: 60,
    liveWatchMs: 5,
    pageStrategiesOff: []
  }, 'an empty environment gives every default')
  t.ok(Object.isFrozen(loadConfig({})), 'the config is frozen')
  t.same(loadConfig({ PORT: '', AUTH_ISSUER: '', LOG_LEVEL: '' }), loadConfig({}), 'empty values count as unset')
})

t.test('values are converted and kept', async (t) => {
  const config = loadConfig({
    PORT: '8080',
    HOST: '127.0.0.1',
    AUTH_ISSUER: 'https://idp.example.com',
    API_AUDIENCE: 'other-api',
    JWKS_MAX_AGE_S: '86400',
    DATABASE_URL: 'postgres://u@db:5432/app',
    WEATHER_API_KEY: 'k',
    NODE_ENV: 'development',
    LOG_LEVEL: 'debug',
    LOG_FORMAT: 'pretty',
    RATE_LIMIT_MAX: '0',
    REDIS_URL: 'redis://cache:6379',
    IDEMPOTENCY_TTL_HOURS: '48',
    SYNC_RETENTION_HOURS: '0.5',
    LIVE_HEARTBEAT_S: '60',
    LIVE_STALL_S: '30'
  })
  t.match(config, {
    port: 8080,
    host: '127.0.0.1',
    authIssuer: 'https://idp.example.com',
    devIdp: false,
    apiAudience: 'other-api',
    jwksMaxAgeS: 86400,
    databaseUrl: 'postgres://u@db:5432/app',
    weatherApiKey: 'k',
    development: true,
    production: false,
    logLevel: 'debug',
    logFormat: 'pretty',
    rateLimitMax: 0,
    redisUrl: 'redis://cache:6379',
    idempotencyTtlHours: 48,
    syncRetentionHours: 0.5,
    liveHeartbeatS: 60,
    liveStallS: 30
  }, 'every variable lands, converted to its type')
  t.equal(loadConfig({ DATABASE_URL: 'memory://' }).databaseUrl, 'memory://', 'memory:// is accepted')
  t.equal(loadConfig({ JWKS_MAX_AGE_S: '1' }).jwksMaxAgeS, 1, 'JWKS_MAX_AGE_S=1 is the shortest')
  t.equal(loadConfig({ DATABASE_URL: 'postgresql://u@db/app' }).databaseUrl, 'postgresql://u@db/app', 'postgresql:// is accepted')
})

t.test('AUTH_ISSUER: a single trailing slash is stripped', async (t) => {
  t.same(
    [loadConfig({ AUTH_ISSUER: 'https://idp.example.com/' }).authIssuer, loadConfig({ AUTH_ISSUER: 'https://idp.example.com/' }).devIdp],
    ['https://idp.example.com', false], 'https://idp.example.com/ → https://idp.example.com, not the dev provider')
  t.equal(loadConfig({ AUTH_ISSUER: 'https://idp.example.com/tenant/' }).authIssuer, 'https://idp.example.com/tenant', 'with a path too')
})

t.test('CORS_ORIGINS: *, or origins kept as browsers send them', async (t) => {
  t.equal(loadConfig({ CORS_ORIGINS: '*' }).corsOrigins, '*', '* allows any origin')
  t.equal(loadConfig({ CORS_ORIGINS: ' * ' }).corsOrigins, '*', 'surrounding blanks are ignored')
  t.same(loadConfig({ CORS_ORIGINS: 'https://app.example.com' }).corsOrigins, ['https://app.example.com'], 'one origin')
  t.same(loadConfig({ CORS_ORIGINS: 'https://app.example.com, http://localhost:5173,http://[::1]:8080' }).corsOrigins,
    ['https://app.example.com', 'http://localhost:5173', 'http://[::1]:8080'], 'a list, blanks around commas ignored')
  t.same(loadConfig({ CORS_ORIGINS: 'HTTPS://App.Example.com:443,http://localhost:80,https://app.example.com' }).corsOrigins,
    ['https://app.example.com', 'http://localhost'], 'lower-cased, default ports dropped, duplicates once: the form of an Origin header')
  t.equal(loadConfig({ CORS_ORIGINS: '' }).corsOrigins, undefined, 'empty counts as unset')
})

t.test('invalid values: one line naming the variable', async (t) => {
  const cases: Array<[string, Record<string, string>, string]> = [
    ['PORT=abc', { PORT: 'abc' }, 'PORT'],
    ['PORT=70000', { PORT: '70000' }, 'PORT'],
    ['PORT=-1', { PORT: '-1' }, 'PORT'],
    ['PORT=80.5', { PORT: '80.5' }, 'PORT'],
    ['PORT=1e3 (never read as 1)', { PORT: '1e3' }, 'PORT'],
    ['DATABASE_URL=mysql://x', { DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    ['AUTH_ISSUER=not a url', { AUTH_ISSUER: 'not a url' }, 'AUTH_ISSUER'],
    ['LOG_LEVEL=loud', { LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    ['LOG_FORMAT=text', { LOG_FORMAT: 'text' }, 'LOG_FORMAT'],
    ['RATE_LIMIT_MAX=many', { RATE_LIMIT_MAX: 'many' }, 'RATE_LIMIT_MAX'],
    ...['https://app.example.com/', 'https://app.example.com/app', 'https://app.example.com?x=1', 'https://app.example.com#top',
      'app.example.com', 'ftp://app.example.com', 'https://user@app.example.com', 'https://app.example.com:99999', 'null',
      'https://a.example.com,*', 'https://a.example.com,,https://b.example.com', 'https://a.example.com,', '**']
      .map((value): [string, Record<string, string>, string] => [`CORS_ORIGINS=${value}`, { CORS_ORIGINS: value }, 'CORS_ORIGINS']),
    ['IDEMPOTENCY_TTL_HOURS=0', { IDEMPOTENCY_TTL_HOURS: '0' }, 'IDEMPOTENCY_TTL_HOURS'],
    ['IDEMPOTENCY_TTL_HOURS=1.5', { IDEMPOTENCY_TTL_HOURS: '1.5' }, 'IDEMPOTENCY_TTL_HOURS'],
    ['SYNC_RETENTION_HOURS=0', { SYNC_RETENTION_HOURS: '0' }, 'SYNC_RETENTION_HOURS'],
    ['SYNC_RETENTION_HOURS=soon', { SYNC_RETENTION_HOURS: 'soon' }, 'SYNC_RETENTION_HOURS'],
    // Keep-alives below the 75 s idle timeouts of Node and HAProxy, or every quiet stream is closed.
    ...['0', '61', '75', '3600', '1.5', 'often'].map((value): [string, Record<string, string>, string] => [`LIVE_HEARTBEAT_S=${value}`, { LIVE_HEARTBEAT_S: value }, 'LIVE_HEARTBEAT_S']),
    ...['0', '-1', '3601', '2.5', 'never'].map((value): [string, Record<string, string>, string] => [`LIVE_STALL_S=${value}`, { LIVE_STALL_S: value }, 'LIVE_STALL_S']),
    ...['0', '-5', '86401', '1.5', '1e3', 'ten'].map((value): [string, Record<string, string>, string] => [`JWKS_MAX_AGE_S=${value}`, { JWKS_MAX_AGE_S: value }, 'JWKS_MAX_AGE_S']),
    ['NODE_ENV=production without AUTH_ISSUER', { NODE_ENV: 'production' }, 'AUTH_ISSUER']
  ]
  for (const [name, env, variable] of cases) {
    const message = configError(t, env)
    t.match(message, new RegExp(`\\b${variable}\\b`), `${name}: the message names ${variable} (${message})`)
  }

  const production = loadConfig({ NODE_ENV: 'production', AUTH_ISSUER: 'https://idp.example.com/' })
  t.same([production.production, production.devIdp, production.authIssuer], [true, false, 'https://idp.example.com'],
    'NODE_ENV=production with AUTH_ISSUER set is fine, and never the dev provider')
})

t.test('the server exits 1 with one stderr line naming the variable', async (t) => {
  // Only the child gets PORT=abc; this process's environment is never touched.
  const env = { ...LOADER_ENV, PATH: process.env.PATH ?? '', PORT: 'abc' }
  const result = await new Promise<{ code: number | null, stdout: string, stderr: string }>((resolve, reject) => {
    // The child loads TypeScript exactly as this test process does, so coverage from both merges cleanly.
    const child = spawn(process.execPath, [...LOADER_ARGS, 'src/server.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
    // Generous: under a loaded machine the loader compiles every module before the config is read.
    const timer = setTimeout(() => { child.kill('SIGKILL') }, 180_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
  t.equal(result.code, 1, 'exit code 1')
  const lines = result.stderr.split('\n').filter((line) => line !== '')
  t.equal(lines.length, 1, `one stderr line (${JSON.stringify(result.stderr)})`)
  t.match(lines[0], /\bPORT\b/, 'it names PORT')
  t.equal(result.stdout, '', 'nothing on stdout: the server never started')
})

t.test('PAGE_STRATEGIES_OFF: the ways of reading a page a bench sitting leaves out', async (t) => {
  t.same(loadConfig({ PAGE_STRATEGIES_OFF: ' located, anchored,,located ' }).pageStrategiesOff, ['located', 'anchored'], 'trimmed, each once')
  t.throws(() => loadConfig({ PAGE_STRATEGIES_OFF: 'walked' }), { message: /^Invalid PAGE_STRATEGIES_OFF: must be a comma-separated list of start-sought, located, grouped, anchored, followed, awaited \(got "walked"\)$/ },
    'the walk, which every page by number falls back on, cannot be left out')
})
