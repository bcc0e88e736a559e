import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'

export const DEV_IDP_URL = 'http://localhost:3002'

// CONTRACT 2: every variable the service reads, declared once. Values arrive as strings;
// Value.Convert turns them into the declared types before checking.
const EnvSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3001 }),
  HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
  AUTH_ISSUER: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' })),
  API_AUDIENCE: Type.String({ minLength: 1, default: 'backend-3-messages' }),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^(postgres|postgresql|memory)://' })),
  DATABASE_POOL_SIZE: Type.Integer({ minimum: 1, maximum: 1000, default: 10 }),
  DATABASE_STATEMENT_TIMEOUT_MS: Type.Integer({ minimum: 0, default: 10000 }),
  WEATHER_API_KEY: Type.Optional(Type.String()),
  WEATHER_API_URL: Type.String({ pattern: '^https?://[^\\s]+$', default: 'https://api.openweathermap.org/data/2.5/weather' }),
  NODE_ENV: Type.Optional(Type.String()),
  LOG_LEVEL: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)), { default: 'info' }),
  RATE_LIMIT_MAX: Type.Integer({ minimum: 0, default: 6000 }),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' }))
})

type Env = Static<typeof EnvSchema>

export interface AppConfig {
  port: number
  host: string
  /** Base address of the identity provider, without a trailing slash. */
  authIssuer: string
  /** True when the issuer is the local development identity provider that the server starts itself. */
  devIdp: boolean
  apiAudience: string
  /** Undefined means the embedded PGlite under ./.data/. */
  databaseUrl: string | undefined
  databasePoolSize: number
  databaseStatementTimeoutMs: number
  weatherApiKey: string | undefined
  weatherApiUrl: string
  development: boolean
  production: boolean
  logLevel: string
  rateLimitMax: number
  redisUrl: string | undefined
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

const MESSAGES: Record<string, string> = {
  PORT: 'must be an integer from 0 to 65535',
  HOST: 'must not be empty',
  AUTH_ISSUER: 'must be an http(s) URL',
  API_AUDIENCE: 'must not be empty',
  DATABASE_URL: 'must start with postgres://, postgresql:// or memory://',
  DATABASE_POOL_SIZE: 'must be an integer from 1 to 1000',
  DATABASE_STATEMENT_TIMEOUT_MS: 'must be a non-negative integer (milliseconds)',
  WEATHER_API_URL: 'must be an http(s) URL',
  LOG_LEVEL: 'must be one of fatal, error, warn, info, debug, trace, silent',
  RATE_LIMIT_MAX: 'must be a non-negative integer',
  REDIS_URL: 'must start with redis:// or rediss://'
}

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
    databaseUrl: e.DATABASE_URL,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    databaseStatementTimeoutMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
    weatherApiKey: e.WEATHER_API_KEY,
    weatherApiUrl: e.WEATHER_API_URL,
    development: e.NODE_ENV === 'development',
    production,
    logLevel: e.LOG_LEVEL,
    rateLimitMax: e.RATE_LIMIT_MAX,
    redisUrl: e.REDIS_URL
  })
}
