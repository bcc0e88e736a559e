import { STATUS_CODES } from 'node:http'
import cors from '@fastify/cors'
import formbody from '@fastify/formbody'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { Ajv } from 'ajv'
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { validationDetails } from '../http/validation-details.js'
import { DEFAULT_KEYS_DIR, loadOrCreateKeys, type DevIdpKeys } from './keys.js'
import { createCodeStore, createOriginPolicy, isLoopbackHost, type OriginPolicy } from './oauth.js'
import { bodyTypeConstraint, registerOAuthRoutes } from './oauth-routes.js'
import { createTokenSigner, TokenRequestSchema, TokenResponseSchema, verifyOwnToken, type TokenSignerOptions } from './tokens.js'

export { DEFAULT_KEYS_DIR, KEYS_FILE, loadOrCreateKeys, type DevIdpKeys } from './keys.js'
export {
  createTokenSigner, mintToken, TokenRequestSchema, verifyOwnToken,
  type IssuedToken, type TokenRequest, type TokenSigner, type TokenSignerOptions, type UserinfoClaims
} from './tokens.js'

export interface DevIdpOptions extends TokenSignerOptions {
  /** Directory of keys.json; defaults to .data/dev-idp under the working directory. */
  dataDir?: string
  /** Pino-compatible logger; none when omitted. */
  logger?: FastifyBaseLogger
  /**
   * Browser origins (`http://localhost:3001`) that may call /token, the key set and userinfo across
   * origins (CORS), and receive authorization codes at a redirect_uri. Default: any http origin on a
   * loopback host (localhost, 127.0.0.1, [::1]), any port.
   */
  allowedOrigins?: string[]
  /** How long an authorization code can be exchanged, in milliseconds (default 60 000). */
  authorizationCodeTtlMs?: number
  /** How many authorization codes may be outstanding; past it the oldest is dropped (default 1000). */
  maxAuthorizationCodes?: number
}

const ErrorBody = Type.Object({ error: Type.String(), details: Type.Optional(Type.Array(Type.String())) })

const JwksSchema = Type.Object({
  keys: Type.Array(Type.Object({
    kty: Type.String(), n: Type.String(), e: Type.String(), kid: Type.String(), alg: Type.String(), use: Type.String()
  }))
})

const UserinfoSchema = Type.Object({ sub: Type.String(), email: Type.String(), name: Type.String(), role: Type.String() })

const INVALID_TOKEN = 'Invalid or missing token'
const BEARER = /^Bearer ([^\s]+)$/i

function bearerToken (request: FastifyRequest): string | undefined {
  const header = request.headers.authorization
  return header === undefined ? undefined : BEARER.exec(header)?.[1]
}

const FASTIFY_ERRORS: Record<string, { status: number, error: string }> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, error: 'Malformed JSON body' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, error: 'Malformed JSON body' },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, error: 'Request body too large' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, error: 'Unsupported media type' }
}

function handleError (error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (error.validation !== undefined) {
    return reply.code(400).send({ error: 'Validation failed', details: validationDetails(error.validation) })
  }
  const known = FASTIFY_ERRORS[error.code]
  if (known !== undefined) return reply.code(known.status).send({ error: known.error })
  const status = error.statusCode ?? 500
  if (status >= 400 && status < 500) return reply.code(status).send({ error: STATUS_CODES[status] ?? 'Bad request' })
  request.log.error({ err: error }, 'dev identity provider request failed')
  return reply.code(500).send({ error: 'Internal server error' })
}

// Only what a browser client needs across origins; the sign-in page is navigated to, never fetched.
const CORS_PATHS = new Set(['/token', '/.well-known/jwks.json', '/v2/oauth/userinfo'])
// Swagger UI sends X-Requested-With with its token request; userinfo needs Authorization.
const CORS_ALLOWED_HEADERS = ['Authorization', 'Content-Type', 'X-Requested-With']

async function registerCors (idp: FastifyInstance, allowed: OriginPolicy): Promise<void> {
  await idp.register(cors, {
    // Resolving origin false sends no CORS header, and a preflight falls through to the not-found
    // handler (404), for an origin that is not allowed and for every other path.
    delegator (request, callback) {
      const origin = request.headers.origin
      const path = request.url.split('?', 1)[0] ?? ''
      const admitted = origin !== undefined && CORS_PATHS.has(path) && allowed(origin)
      callback(null, {
        origin: admitted ? origin : false,
        methods: ['GET', 'POST'],
        allowedHeaders: CORS_ALLOWED_HEADERS,
        maxAge: 600,
        credentials: false,
        // Strict mode would answer 400 in text/plain.
        strictPreflight: false
      })
    }
  })
}

// Same Ajv settings as the API: no coercion of JSON bodies, every failing field reported.
const validator = new Ajv({ allErrors: true, verbose: true, useDefaults: true, coerceTypes: false, strict: false })

function compileValidator ({ schema }: { schema: object }): ReturnType<Ajv['compile']> {
  return validator.compile(schema)
}

function registerRoutes (idp: FastifyInstance, keys: DevIdpKeys, options: TokenSignerOptions): void {
  const app = idp.withTypeProvider<TypeBoxTypeProvider>()
  const sign = createTokenSigner(keys, options)

  app.get('/.well-known/jwks.json', { schema: { response: { 200: JwksSchema } } }, async function () {
    return { keys: [keys.publicJwk] }
  })

  app.get('/v2/oauth/userinfo', { schema: { response: { 200: UserinfoSchema, 401: ErrorBody } } }, async function (request, reply) {
    const token = bearerToken(request)
    reply.header('cache-control', 'no-store')
    if (token !== undefined) {
      try {
        return await verifyOwnToken(keys, options.issuer, token)
      } catch {}
    }
    // RFC 6750 section 3: error="invalid_token" only when a token was presented.
    reply.code(401).header('www-authenticate', token === undefined ? 'Bearer' : 'Bearer error="invalid_token"')
    return { error: INVALID_TOKEN }
  })

  app.post('/token', {
    schema: { body: TokenRequestSchema, response: { 200: TokenResponseSchema, 400: ErrorBody } }
  }, async function (request, reply) {
    const { accessToken, expiresIn } = await sign(request.body)
    reply.header('cache-control', 'no-store')
    return { access_token: accessToken, token_type: 'Bearer' as const, expires_in: expiresIn }
  })
}

/**
 * The local development identity provider of CONTRACT 3, as a Fastify instance of its own:
 * the API reaches it over HTTP exactly as it would reach an external provider.
 */
export async function buildDevIdp (options: DevIdpOptions): Promise<FastifyInstance> {
  const allowed = createOriginPolicy(options.allowedOrigins)
  const codes = createCodeStore({ ttlMs: options.authorizationCodeTtlMs, maxCodes: options.maxAuthorizationCodes })
  const keys = await loadOrCreateKeys(options.dataDir ?? DEFAULT_KEYS_DIR)
  const idp = Fastify({
    ...(options.logger === undefined ? { logger: false } : { loggerInstance: options.logger }),
    bodyLimit: 16 * 1024,
    routerOptions: { constraints: { bodyType: bodyTypeConstraint } },
    // A malformed URL never reaches the error handler otherwise, and Fastify's own body names its internals.
    frameworkErrors: handleError
  })
  // CONTRACT 16: answered only under a loopback name, first of all (CORS preflights included), so a
  // page on another site cannot reach it through DNS rebinding and mint tokens of any role.
  idp.addHook('onRequest', async function (request, reply) {
    if (!isLoopbackHost(request.headers.host)) return await reply.code(421).send({ error: 'Misdirected request' })
  })
  // JSON, and form bodies for the OAuth routes; a text body is 415, not a validation error.
  idp.removeContentTypeParser(['text/plain'])
  await idp.register(formbody)
  await registerCors(idp, allowed)
  idp.setValidatorCompiler(compileValidator)
  idp.setErrorHandler(handleError)
  idp.setNotFoundHandler(async function (request, reply) {
    return await reply.code(404).send({ error: 'Not found' })
  })
  const signer = { issuer: options.issuer, audience: options.audience }
  registerRoutes(idp, keys, signer)
  registerOAuthRoutes(idp, { sign: createTokenSigner(keys, signer), codes, allowed })
  return idp
}
