import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { isIP } from 'node:net'
import { splitUrls } from './db/failover/hosts.js'
import { parseStrategiesOff, SWITCHABLE_STRATEGIES, type SwitchableStrategy } from './pages/strategies/switches.js'
import { OTEL_ENV, OTEL_MESSAGES, tracingSettings, type TracingConfig } from './tracing/settings.js'

export const DEV_IDP_URL = 'http://localhost:3002'

// CONTRACT 2: every variable the service reads, declared once. Values arrive as strings;
// Value.Convert turns them into the declared types before checking. Exported for the test that holds
// docs/configuration.md to it.
export const EnvSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3001 }),
  HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
  AUTH_ISSUER: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' })),
  API_AUDIENCE: Type.String({ minLength: 1, default: 'backend-3-messages' }),
  JWKS_MAX_AGE_S: Type.Integer({ minimum: 1, maximum: 86400, default: 600 }),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^(postgres|postgresql|memory)://' })),
  DATABASE_POOL_SIZE: Type.Integer({ minimum: 1, maximum: 1000, default: 10 }),
  DATABASE_STATEMENT_TIMEOUT_MS: Type.Integer({ minimum: 0, default: 10000 }),
  WEATHER_API_KEY: Type.Optional(Type.String()),
  WEATHER_API_URL: Type.String({ pattern: '^https?://[^\\s]+$', default: 'https://api.openweathermap.org/data/2.5/weather' }),
  NODE_ENV: Type.Optional(Type.String()),
  LOG_LEVEL: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)), { default: 'info' }),
  LOG_FORMAT: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('pretty')])),
  RATE_LIMIT_MAX: Type.Integer({ minimum: 0, default: 6000 }),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  // Each URL may name several hosts (libpq's form, CONTRACT 14), commas included.
  DATABASE_READ_URLS: Type.Optional(Type.String({ pattern: '^\\s*postgres(ql)?://[^\\s,]+(,[^\\s,]+)*(\\s*,\\s*postgres(ql)?://[^\\s,]+(,[^\\s,]+)*)*\\s*$' })),
  TRUST_PROXY: Type.Optional(Type.String({ minLength: 1 })),
  METRICS_TOKEN: Type.Optional(Type.String()),
  // CONTRACT 15: the standard OTEL_* variables, declared in src/tracing/settings.ts.
  ...OTEL_ENV,
  MAX_EVENT_LOOP_DELAY_MS: Type.Integer({ minimum: 0, default: 1000 }),
  SHUTDOWN_GRACE_MS: Type.Integer({ minimum: 0, default: 10000 }),
  CORS_ORIGINS: Type.Optional(Type.String({ minLength: 1 })),
  IDEMPOTENCY_TTL_HOURS: Type.Integer({ minimum: 1, maximum: 8760, default: 24 }),
  SYNC_RETENTION_HOURS: Type.Number({ exclusiveMinimum: 0, maximum: 87600, default: 720 }),
  LIVE_MAX_CONNECTIONS: Type.Integer({ minimum: 0, default: 10000 }),
  LIVE_MAX_PER_CLIENT: Type.Integer({ minimum: 1, default: 100 }),
  LIVE_MAX_BUFFER_BYTES: Type.Integer({ minimum: 1024, default: 1048576 }),
  // Below the 75 s idle timeouts of Node (CONNECTION_TIMEOUT_MS) and deploy/haproxy.cfg, so a quiet stream is never closed as idle.
  LIVE_HEARTBEAT_S: Type.Integer({ minimum: 1, maximum: 60, default: 15 }),
  LIVE_STALL_S: Type.Integer({ minimum: 1, maximum: 3600, default: 60 }),
  LIVE_WATCH_MS: Type.Integer({ minimum: 1, maximum: 10000, default: 5 }),
  // For a bench sitting only: the ways of reading a page to leave out (src/pages/README.md).
  PAGE_STRATEGIES_OFF: Type.Optional(Type.String())
})

type Env = Static<typeof EnvSchema>

/** JSON lines for machines, or pino-pretty's lines for a person at a terminal. */
export type LogFormat = 'json' | 'pretty'

export interface AppConfig {
  port: number
  host: string
  /** Base address of the identity provider, without a trailing slash. */
  authIssuer: string
  /** True when the issuer is the local development identity provider that the server starts itself. */
  devIdp: boolean
  apiAudience: string
  /** The longest a fetched key set is trusted; after a failed fetch its keys serve one more of it (CONTRACT 16). */
  jwksMaxAgeS: number
  /** Undefined means the embedded PGlite under ./.data/. */
  databaseUrl: string | undefined
  databasePoolSize: number
  databaseStatementTimeoutMs: number
  weatherApiKey: string | undefined
  weatherApiUrl: string
  development: boolean
  production: boolean
  logLevel: string
  /** LOG_FORMAT; undefined: pretty on a terminal outside production, JSON lines everywhere else. */
  logFormat: LogFormat | undefined
  rateLimitMax: number
  redisUrl: string | undefined
  /** Streaming replicas that serve collection pages, search and single-message reads (CONTRACT 11). */
  databaseReadUrls: string[]
  /** Fastify's trustProxy: a hop count or the proxies' addresses/CIDRs; undefined trusts no proxy. */
  trustProxy: number | string[] | undefined
  /** Bearer token GET /metrics requires; undefined leaves it open. */
  metricsToken: string | undefined
  /** OpenTelemetry traces (CONTRACT 15); undefined: tracing is off. */
  tracing: TracingConfig | undefined
  /** Event-loop delay above which requests are shed with 503; 0 turns shedding off. */
  maxEventLoopDelayMs: number
  /** How long in-flight requests may take after SIGTERM/SIGINT. */
  shutdownGraceMs: number
  /** Browser origins allowed to call the API (CONTRACT 12), or '*' for any; undefined: no CORS at all. */
  corsOrigins: '*' | string[] | undefined
  /** How long an Idempotency-Key and its stored 201 are kept (CONTRACT 12). */
  idempotencyTtlHours: number
  /** How long the delta-sync change log keeps a change, and a sync token stays valid (CONTRACT 12). */
  syncRetentionHours: number
  /** Held long-polls and open streams per instance (CONTRACT 13); 0 turns live delivery off. */
  liveMaxConnections: number
  /** Held long-polls and open streams per client address. */
  liveMaxPerClient: number
  /** A stream's next event is written only once less than this many bytes of what it was sent wait unsent. */
  liveMaxBufferBytes: number
  /** Seconds without an event after which a stream gets a keep-alive comment. */
  liveHeartbeatS: number
  /** Seconds a stream's client may read nothing it was sent before the stream is closed. */
  liveStallS: number
  /** How often the instance's watcher reads the head of the change log while clients wait. */
  liveWatchMs: number
  /** Ways of reading a page left out, for a bench sitting (src/pages/README.md); empty: every one is on. */
  pageStrategiesOff: SwitchableStrategy[]
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

const MESSAGES: Record<string, string> = {
  PORT: 'must be an integer from 0 to 65535',
  HOST: 'must not be empty',
  AUTH_ISSUER: 'must be an http(s) URL',
  API_AUDIENCE: 'must not be empty',
  JWKS_MAX_AGE_S: 'must be an integer from 1 to 86400 (seconds)',
  DATABASE_URL: 'must start with postgres://, postgresql:// or memory://',
  DATABASE_POOL_SIZE: 'must be an integer from 1 to 1000',
  DATABASE_STATEMENT_TIMEOUT_MS: 'must be a non-negative integer (milliseconds)',
  WEATHER_API_URL: 'must be an http(s) URL',
  LOG_LEVEL: 'must be one of fatal, error, warn, info, debug, trace, silent',
  LOG_FORMAT: 'must be json or pretty',
  RATE_LIMIT_MAX: 'must be a non-negative integer',
  REDIS_URL: 'must start with redis:// or rediss://',
  DATABASE_READ_URLS: 'must be a comma-separated list of postgres:// URLs',
  TRUST_PROXY: 'must be a hop count or a comma-separated list of IP addresses or CIDR ranges',
  ...OTEL_MESSAGES,
  MAX_EVENT_LOOP_DELAY_MS: 'must be a non-negative integer (milliseconds)',
  SHUTDOWN_GRACE_MS: 'must be a non-negative integer (milliseconds)',
  CORS_ORIGINS: 'must be * or a comma-separated list of http(s) origins without a path, such as https://app.example.com',
  IDEMPOTENCY_TTL_HOURS: 'must be an integer from 1 to 8760 (hours)',
  SYNC_RETENTION_HOURS: 'must be a number of hours above 0 and at most 87600',
  LIVE_MAX_CONNECTIONS: 'must be a non-negative integer (0 turns live delivery off)',
  LIVE_MAX_PER_CLIENT: 'must be a positive integer',
  LIVE_MAX_BUFFER_BYTES: 'must be an integer of at least 1024 (bytes)',
  LIVE_HEARTBEAT_S: 'must be an integer from 1 to 60 (seconds), below the 75 s idle timeouts',
  LIVE_STALL_S: 'must be an integer from 1 to 3600 (seconds)',
  LIVE_WATCH_MS: 'must be an integer from 1 to 10000 (milliseconds)',
  PAGE_STRATEGIES_OFF: `must be a comma-separated list of ${SWITCHABLE_STRATEGIES.join(', ')}`
}

// An address, an address/prefix, or one of proxy-addr's names for the private ranges.
const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal'])
function isProxyAddress (entry: string): boolean {
  if (PROXY_NAMES.has(entry)) return true
  const [address = '', prefix, extra] = entry.split('/')
  const family = isIP(address)
  if (family === 0 || extra !== undefined) return false
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128))
}

/** CONTRACT 11: `1` is a hop count; anything else a list of trusted proxies. null when invalid. */
function parseTrustProxy (value: string | undefined): AppConfig['trustProxy'] | null {
  if (value === undefined) return undefined
  if (/^\s*\d+\s*$/.test(value)) return Number(value)
  const entries = value.split(',').map((entry) => entry.trim())
  return entries.every(isProxyAddress) ? entries : null
}

// scheme://host[:port] and nothing more: a path, query, fragment or credentials never match an Origin header.
const ORIGIN_FORM = /^https?:\/\/[^/?#@\s]+$/i

/**
 * CONTRACT 12: `*`, or origins as browsers send them in Origin (scheme and host lower-case, no default
 * port), so `https://App.example.com:443` is kept as `https://app.example.com`. null when invalid.
 */
function parseCorsOrigins (value: string | undefined): AppConfig['corsOrigins'] | null {
  if (value === undefined) return undefined
  if (value.trim() === '*') return '*'
  const origins: string[] = []
  for (const entry of value.split(',').map((part) => part.trim())) {
    if (!ORIGIN_FORM.test(entry) || !URL.canParse(entry)) return null
    const origin = new URL(entry).origin
    if (!origins.includes(origin)) origins.push(origin)
  }
  return origins
}

const invalid = (name: string, raw: Record<string, string>): ConfigError =>
  new ConfigError(`Invalid ${name}: ${MESSAGES[name] ?? 'invalid value'} (got ${JSON.stringify(raw[name] ?? '')})`)

export const stripTrailingSlash = (url: string): string => url.endsWith('/') ? url.slice(0, -1) : url

/**
 * Reads the environment once. Throws a ConfigError whose message is one line naming the variable.
 * Empty strings count as unset, so `PORT=` behaves like no PORT at all.
 */
export function loadConfig (env: NodeJS.ProcessEnv = process.env): AppConfig {
  const raw: Record<string, string> = {}
  for (const key of Object.keys(EnvSchema.properties)) {
    const value = env[key]
    if (value !== undefined && value !== '') raw[key] = value
  }
  const converted = Value.Convert(EnvSchema, Value.Default(EnvSchema, { ...raw })) as Record<string, unknown>
  // Value.Convert reads integers with parseInt ("80.5" → 80, "1e3" → 1). An integer variable must be
  // written as one; otherwise the raw string stays and is reported like any invalid value (CONTRACT 2).
  for (const [key, schema] of Object.entries(EnvSchema.properties)) {
    const value = raw[key]
    if (schema.type === 'integer' && value !== undefined && !/^\s*-?\d+\s*$/.test(value)) converted[key] = value
  }
  const first = Value.Errors(EnvSchema, converted).First()
  if (first !== undefined) {
    const name = first.path.split('/')[1] ?? 'configuration'
    throw new ConfigError(`Invalid ${name}: ${MESSAGES[name] ?? first.message} (got ${JSON.stringify(raw[name] ?? '')})`)
  }
  const e = converted as Env
  const trustProxy = parseTrustProxy(e.TRUST_PROXY)
  if (trustProxy === null) throw invalid('TRUST_PROXY', raw)
  const corsOrigins = parseCorsOrigins(e.CORS_ORIGINS)
  if (corsOrigins === null) throw invalid('CORS_ORIGINS', raw)
  const tracing = tracingSettings(e)
  if (typeof tracing === 'string') throw invalid(tracing, raw)
  const databaseReadUrls = e.DATABASE_READ_URLS === undefined ? [] : splitUrls(e.DATABASE_READ_URLS)
  if (databaseReadUrls.length > 0 && !/^postgres(ql)?:\/\//.test(e.DATABASE_URL ?? '')) {
    throw new ConfigError('DATABASE_READ_URLS needs DATABASE_URL to be a postgres:// URL (replicas follow a PostgreSQL primary)')
  }
  const pageStrategiesOff = parseStrategiesOff(e.PAGE_STRATEGIES_OFF)
  if (!Array.isArray(pageStrategiesOff)) throw invalid('PAGE_STRATEGIES_OFF', raw)
  const production = e.NODE_ENV === 'production'
  if (production && e.AUTH_ISSUER === undefined) {
    throw new ConfigError('AUTH_ISSUER must be set when NODE_ENV=production (the local development identity provider never runs in production)')
  }
  return Object.freeze({
    port: e.PORT,
    host: e.HOST,
    authIssuer: stripTrailingSlash(e.AUTH_ISSUER ?? DEV_IDP_URL),
    devIdp: e.AUTH_ISSUER === undefined,
    apiAudience: e.API_AUDIENCE,
    jwksMaxAgeS: e.JWKS_MAX_AGE_S,
    databaseUrl: e.DATABASE_URL,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    databaseStatementTimeoutMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
    weatherApiKey: e.WEATHER_API_KEY,
    weatherApiUrl: e.WEATHER_API_URL,
    development: e.NODE_ENV === 'development',
    production,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    rateLimitMax: e.RATE_LIMIT_MAX,
    redisUrl: e.REDIS_URL,
    databaseReadUrls,
    trustProxy,
    metricsToken: e.METRICS_TOKEN,
    tracing,
    maxEventLoopDelayMs: e.MAX_EVENT_LOOP_DELAY_MS,
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    corsOrigins,
    idempotencyTtlHours: e.IDEMPOTENCY_TTL_HOURS,
    syncRetentionHours: e.SYNC_RETENTION_HOURS,
    liveMaxConnections: e.LIVE_MAX_CONNECTIONS,
    liveMaxPerClient: e.LIVE_MAX_PER_CLIENT,
    liveMaxBufferBytes: e.LIVE_MAX_BUFFER_BYTES,
    liveHeartbeatS: e.LIVE_HEARTBEAT_S,
    liveStallS: e.LIVE_STALL_S,
    liveWatchMs: e.LIVE_WATCH_MS,
    pageStrategiesOff
  })
}
