import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import authPlugin from '../plugins/auth.js'
import dbPlugin from '../plugins/db.js'
import errorsPlugin, { createErrorHandler } from '../plugins/errors.js'
import securityPlugin from '../plugins/security.js'
import swaggerPlugin from '../plugins/swagger.js'
import rateLimitPlugin from '../plugins/rate-limit.js'
import rolesPlugin from '../plugins/roles.js'
import validationPlugin from '../plugins/validation.js'
import healthRoutes from '../routes/health.js'
import helloRoutes from '../routes/hello/index.js'
import inputRoutes from '../routes/input/index.js'
import messagesRoutes from '../routes/messages/index.js'
import moviesRoutes from '../routes/movies/index.js'
import usersRoutes from '../routes/users/index.js'
import weatherRoutes from '../routes/weather/index.js'
import type { AppConfig } from './config.js'
import { PaginationSchema } from './lib/pagination.js'
import { ErrorSchema } from './schemas/common.js'
import { MessageSchema } from './schemas/messages.js'
import { MovieSchema } from './schemas/movies.js'
import { UserSchema } from './schemas/users.js'

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
}

export type App = FastifyInstance

export const BODY_LIMIT = 100 * 1024

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

export function loggerOptions (config: AppConfig): FastifyServerOptions['logger'] {
  return {
    level: config.logLevel,
    // Tokens never reach the logs (CONTRACT 1).
    redact: { paths: ['req.headers.authorization', 'req.headers["x-test-user"]', 'req.headers.cookie'], censor: '[redacted]' }
  }
}

export async function buildApp (config: AppConfig, options: BuildOptions = {}): Promise<App> {
  const errorHandler = createErrorHandler(config.development)
  const app = Fastify({
    logger: options.logger ?? loggerOptions(config),
    genReqId: requestId,
    bodyLimit: BODY_LIMIT,
    allowErrorHandlerOverride: false,
    // A first start initialises the embedded database and applies migrations, which can take a while.
    pluginTimeout: 120_000,
    routerOptions: { querystringParser: parseQuery },
    // A bad URL or an over-long path parameter is rejected before routing; same error shape.
    frameworkErrors: function (error, request, reply) {
      reply.header('x-request-id', request.id)
      return errorHandler(error, request, reply)
    }
  }).withTypeProvider<TypeBoxTypeProvider>()

  app.addHook('onRequest', async function (request, reply) {
    reply.header('x-request-id', request.id)
  })
  // JSON only: a text body on a JSON route is 415, not a validation error (CONTRACT 8).
  app.removeContentTypeParser(['text/plain'])

  await app.register(validationPlugin)
  await app.register(errorsPlugin, { development: config.development })
  await app.register(dbPlugin, {
    url: config.databaseUrl,
    dataDir: options.dataDir,
    poolSize: config.databasePoolSize,
    statementTimeoutMs: config.databaseStatementTimeoutMs
  })
  await app.register(authPlugin, { issuer: config.authIssuer, audience: config.apiAudience, testAuth: options.testAuth === true })
  await app.register(rolesPlugin)
  await app.register(rateLimitPlugin, { max: config.rateLimitMax, redisUrl: config.redisUrl })

  for (const schema of [ErrorSchema, PaginationSchema, MessageSchema, MovieSchema, UserSchema]) app.addSchema(schema)
  await app.register(securityPlugin)
  await app.register(swaggerPlugin, { title: 'Messages API', version: '1.0.0' })

  await app.register(healthRoutes)
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
