import { randomUUID } from 'node:crypto'
import type { IncomingMessage, Server } from 'node:http'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { LogController, type FastifyHttpOptions, type FastifyInstance, type FastifyServerOptions } from 'fastify'
import authPlugin from '../plugins/auth.js'
import changesPlugin, { changesOptions } from '../plugins/changes.js'
import compressionPlugin from '../plugins/compression.js'
import corsPlugin from '../plugins/cors.js'
import dbPlugin from '../plugins/db.js'
import idempotencyPlugin from '../plugins/idempotency.js'
import errorsPlugin, { clientErrorHandler, createErrorHandler } from '../plugins/errors.js'
import securityPlugin from '../plugins/security.js'
import swaggerPlugin from '../plugins/swagger.js'
import usersPlugin from '../plugins/users.js'
import rateLimitPlugin from '../plugins/rate-limit.js'
import representationPlugin from '../plugins/representation.js'
import rolesPlugin from '../plugins/roles.js'
import validationPlugin from '../plugins/validation.js'
import lifecyclePlugin from '../plugins/lifecycle.js'
import loadSheddingPlugin from '../plugins/load-shedding.js'
import messagesPlugin from '../plugins/messages.js'
import metricsPlugin from '../plugins/metrics.js'
import moviesPlugin from '../plugins/movies.js'
import requestLogPlugin from '../plugins/request-log.js'
import healthRoutes from '../routes/health.js'
import helloRoutes from '../routes/hello/index.js'
import metricsRoutes from '../routes/metrics.js'
import inputRoutes from '../routes/input/index.js'
import messagesRoutes from '../routes/messages/index.js'
import moviesRoutes from '../routes/movies/index.js'
import usersRoutes from '../routes/users/index.js'
import weatherRoutes from '../routes/weather/index.js'
import type { AppConfig } from './config.js'
import { turnOffPageStrategies } from './pages/strategies/switches.js'
import { wellFormedUrl } from './http/well-formed-url.js'
import { stdoutLines } from './logging/log-stream.js'
import { traceIdsMixin } from './tracing/log-ids.js'
import { SHARED_SCHEMAS } from './schemas/shared.js'

export interface BuildOptions {
  /** Pino options, or false for no logging. Defaults to JSON lines at config.logLevel. */
  logger?: FastifyServerOptions['logger']
  /** Where the embedded database lives when config.databaseUrl is unset. */
  dataDir?: string
  /**
   * Replace token verification by the x-test-user header stub of SPEC 5.7. Only code can set
   * this; nothing in the environment turns it on.
   */
  testAuth?: boolean
  /**
   * Overrides of the server timeouts below, so a test can watch a slow client being cut off in
   * seconds instead of waiting for the production values. Only code can set this.
   */
  timeouts?: Partial<ServerTimeouts>
}

export type App = FastifyInstance

export const BODY_LIMIT = 100 * 1024
// Node's limit on a request line and headers together (its default maxHeaderSize); past it, 431.
export const MAX_HEADER_BYTES = 16 * 1024

// Server timeouts (docs/operations.md, "Limits and timeouts"). keepAliveTimeout is above the 60 s idle timeout of common
// load balancers, so the balancer, not the server, closes an idle connection and never reuses one
// the server is closing. A whole request (headers and body) must arrive within REQUEST_TIMEOUT_MS,
// which cuts off clients that trickle bytes; a socket silent for CONNECTION_TIMEOUT_MS is closed.
export const KEEP_ALIVE_TIMEOUT_MS = 72_000
export const REQUEST_TIMEOUT_MS = 15_000
export const HEADERS_TIMEOUT_MS = 10_000
export const CONNECTION_TIMEOUT_MS = 75_000
// How often Node checks requestTimeout/headersTimeout; its default of 30 s would let a slow client
// hold a connection for up to twice the limit.
export const TIMEOUT_CHECK_INTERVAL_MS = 1_000

export interface ServerTimeouts {
  keepAliveTimeoutMs: number
  requestTimeoutMs: number
  headersTimeoutMs: number
  connectionTimeoutMs: number
  checkIntervalMs: number
}

export const SERVER_TIMEOUTS: Readonly<ServerTimeouts> = Object.freeze({
  keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
  requestTimeoutMs: REQUEST_TIMEOUT_MS,
  headersTimeoutMs: HEADERS_TIMEOUT_MS,
  connectionTimeoutMs: CONNECTION_TIMEOUT_MS,
  checkIntervalMs: TIMEOUT_CHECK_INTERVAL_MS
})

// A caller's own request id is echoed when it is short and printable; anything else is replaced.
const SANE_REQUEST_ID = /^[\w.:@/+=-]{1,128}$/

function requestId (req: IncomingMessage): string {
  const given = req.headers['x-request-id']
  return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : randomUUID()
}

// CONTRACT 10: a query key given twice uses its first value.
function parseQuery (query: string): Record<string, string> {
  const result: Record<string, string> = {}
  for (const [key, value] of new URLSearchParams(query)) {
    if (!Object.hasOwn(result, key)) result[key] = value
  }
  return result
}

function canResolve (specifier: string): boolean {
  try {
    import.meta.resolve(specifier)
    return true
  } catch {
    return false
  }
}

/**
 * LOG_FORMAT when set; otherwise pino-pretty's lines for a person at a terminal outside production,
 * and JSON lines wherever a machine reads them (pipes, files, tests, CI, production). pino-pretty is
 * a development dependency, so where it is not installed the terminal rule keeps JSON lines instead
 * of failing the start. The defaults read the process; tests pass every input.
 */
export function loggerOptions (
  config: AppConfig,
  isTTY = process.stdout.isTTY === true,
  prettyInstalled = canResolve('pino-pretty')
): FastifyServerOptions['logger'] {
  const options = {
    level: config.logLevel,
    // Tokens never reach the logs (CONTRACT 1). Redaction runs here, before either format is written.
    redact: { paths: ['req.headers.authorization', 'req.headers["x-test-user"]', 'req.headers.cookie'], censor: '[redacted]' }
  }
  const pretty = config.logFormat === undefined ? isTTY && !config.production && prettyInstalled : config.logFormat === 'pretty'
  if (!pretty) return options
  // A worker thread formats the lines; colours only when a terminal shows them.
  return { ...options, transport: { target: 'pino-pretty', options: { colorize: isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } }
}

/** The process's own logger: loggerOptions, with JSON lines written to stdout without blocking (src/logging/log-stream.ts). */
export function processLoggerOptions (config: AppConfig): FastifyServerOptions['logger'] {
  const options = loggerOptions(config) as Record<string, unknown>
  // pino-pretty's transport already writes from a worker thread.
  return Object.hasOwn(options, 'transport') ? options : { ...options, stream: stdoutLines() }
}

// Fastify takes a hop count at run time but its types do not; the same rule as a function.
function trustProxyOption (trust: AppConfig['trustProxy']): FastifyServerOptions['trustProxy'] {
  return typeof trust === 'number' ? (_address: string, hop: number) => hop < trust : trust
}

/** CONTRACT 15: with tracing on, each line written for a request carries its trace's ids; off, no mixin at all. */
function withTraceIds (logger: FastifyServerOptions['logger'], tracing: boolean): FastifyServerOptions['logger'] {
  if (!tracing || logger === false || logger === undefined) return logger
  return { ...(logger === true ? {} : logger), mixin: traceIdsMixin }
}

/** The server's own options: logging, timeouts, limits, and the error shape of what fails before routing. */
function serverOptions (config: AppConfig, options: BuildOptions, errorHandler: ReturnType<typeof createErrorHandler>): FastifyHttpOptions<Server> {
  const timeouts = { ...SERVER_TIMEOUTS, ...options.timeouts }
  return {
    logger: withTraceIds(options.logger ?? loggerOptions(config), config.tracing !== undefined),
    genReqId: requestId,
    // One line per request from plugins/request-log.ts instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    keepAliveTimeout: timeouts.keepAliveTimeoutMs,
    requestTimeout: timeouts.requestTimeoutMs,
    connectionTimeout: timeouts.connectionTimeoutMs,
    http: { headersTimeout: timeouts.headersTimeoutMs, connectionsCheckingInterval: timeouts.checkIntervalMs },
    // Idle keep-alive connections are closed on close(); requests still arriving on busy ones are
    // served (with Connection: close, plugins/lifecycle.ts) instead of Fastify's own 503 body.
    forceCloseConnections: 'idle',
    return503OnClosing: false,
    bodyLimit: BODY_LIMIT,
    // CONTRACT 11: behind a load balancer, request.ip is the client from X-Forwarded-For.
    trustProxy: trustProxyOption(config.trustProxy),
    allowErrorHandlerOverride: false,
    // A first start initialises the embedded database and applies migrations, which can take a while.
    pluginTimeout: 120_000,
    // A path parameter as long as a request line can be: the router's default of 100 answered 414 to
    // values the routes document (a 200-character city), instead of the route's own rule.
    routerOptions: { querystringParser: parseQuery, maxParamLength: MAX_HEADER_BYTES },
    // CONTRACT 16: the target as a well-formed URI before routing. Malformed percent-encoding becomes
    // U+FFFD, so each route answers a bad parameter with its own 400 instead of the router's generic
    // one; a raw character no URI holds is encoded before a header (a redirect's Location) is built from it.
    rewriteUrl: (req) => wellFormedUrl(req.url ?? '/'),
    // A bad URL or an over-long path parameter is rejected before routing; same error shape.
    frameworkErrors: function (error, request, reply) {
      reply.header('x-request-id', request.id)
      return errorHandler(error, request, reply)
    },
    // What Node's HTTP parser rejects (malformed bytes, oversized headers, slow clients): same shape.
    clientErrorHandler
  }
}

export async function buildApp (config: AppConfig, options: BuildOptions = {}): Promise<App> {
  // Empty unless a bench sitting leaves some out: the page readers are built before any config is read.
  turnOffPageStrategies(config.pageStrategiesOff)
  const errorHandler = createErrorHandler(config.development)
  const app = Fastify(serverOptions(config, options, errorHandler)).withTypeProvider<TypeBoxTypeProvider>()
  // First, so every route and hook is seen; imported only when on, so tracing off loads no SDK.
  if (config.tracing !== undefined) await app.register(import('../plugins/tracing.js'), config.tracing)

  app.addHook('onRequest', function (request, reply, done) {
    reply.header('x-request-id', request.id)
    done()
  })
  // JSON only: a text body on a JSON route is 415, not a validation error (CONTRACT 8).
  app.removeContentTypeParser(['text/plain'])

  await app.register(validationPlugin)
  await app.register(errorsPlugin, { development: config.development })
  await app.register(lifecyclePlugin)
  // Security headers, then CORS, before anything that can refuse a request (load shedding, auth,
  // the rate limit): a preflight is answered before authentication with the security headers on it,
  // and a browser can read a 503, 401 or 429 and its Retry-After.
  // CONTRACT 3's provider signs Swagger UI in by itself (its token endpoint is fetched from the page);
  // a real AUTH_ISSUER documents bearer tokens only.
  const signIn = config.devIdp && !config.production
    ? { authorizationUrl: `${config.authIssuer}/authorize`, tokenUrl: `${config.authIssuer}/token`, clientId: 'swagger-ui' }
    : undefined
  await app.register(securityPlugin, { signInOrigin: signIn === undefined ? undefined : new URL(config.authIssuer).origin })
  // Before CORS: its Vary: Origin is added to the Vary: Accept-Encoding set here.
  await app.register(compressionPlugin)
  await app.register(representationPlugin)
  if (config.corsOrigins !== undefined) await app.register(corsPlugin, { origins: config.corsOrigins })
  await app.register(loadSheddingPlugin, { maxEventLoopDelayMs: config.maxEventLoopDelayMs })
  await app.register(dbPlugin, {
    url: config.databaseUrl,
    dataDir: options.dataDir,
    poolSize: config.databasePoolSize,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
    readUrls: config.databaseReadUrls,
    traced: config.tracing !== undefined
  })
  // Each capability's repository and upkeep, on the database handles (users and messages after auth, below).
  await app.register(moviesPlugin)
  await app.register(idempotencyPlugin, { ttlHours: config.idempotencyTtlHours })
  await app.register(changesPlugin, changesOptions(config))
  // The rate limit before auth, which counts refused tokens in it; it counts everything else after auth has run.
  await app.register(rateLimitPlugin, { max: config.rateLimitMax, redisUrl: config.redisUrl })
  await app.register(authPlugin, { issuer: config.authIssuer, audience: config.apiAudience, testAuth: options.testAuth === true, jwksMaxAgeS: config.jwksMaxAgeS })
  // Users provision the caller auth yields; a create writes as that local user, with the idempotency store.
  await app.register(usersPlugin, { issuer: config.authIssuer })
  await app.register(messagesPlugin, { idempotencyTtlHours: config.idempotencyTtlHours })
  await app.register(rolesPlugin)
  await app.register(requestLogPlugin)
  await app.register(metricsPlugin, {
    issuer: config.authIssuer,
    driver: config.databaseUrl !== undefined && /^postgres(ql)?:\/\//.test(config.databaseUrl) ? 'postgres' : 'pglite',
    poolSize: config.databasePoolSize
  })

  for (const schema of SHARED_SCHEMAS) app.addSchema(schema)
  await app.register(swaggerPlugin, { title: 'Messages API', version: '2.0.0', signIn })

  await app.register(healthRoutes)
  await app.register(metricsRoutes, { token: config.metricsToken })
  await app.register(async function v2 (api) {
    await api.register(messagesRoutes, { prefix: '/messages' })
    await api.register(usersRoutes, { prefix: '/users' })
    await api.register(helloRoutes, { prefix: '/hello' })
    await api.register(moviesRoutes, { prefix: '/movies' })
    await api.register(inputRoutes, { prefix: '/input' })
    await api.register(weatherRoutes, { prefix: '/weather', apiKey: config.weatherApiKey, url: config.weatherApiUrl })
  }, { prefix: '/v2' })

  return app
}
