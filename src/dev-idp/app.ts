import { STATUS_CODES } from 'node:http'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { Ajv } from 'ajv'
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { validationDetails } from '../lib/validation.js'
import { DEFAULT_KEYS_DIR, loadOrCreateKeys, type DevIdpKeys } from './keys.js'
import { createTokenSigner, TokenRequestSchema, verifyOwnToken, type TokenSignerOptions } from './tokens.js'

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
}

const ErrorBody = Type.Object({ error: Type.String(), details: Type.Optional(Type.Array(Type.String())) })

const JwksSchema = Type.Object({
  keys: Type.Array(Type.Object({
    kty: Type.String(), n: Type.String(), e: Type.String(), kid: Type.String(), alg: Type.String(), use: Type.String()
  }))
})

const UserinfoSchema = Type.Object({ sub: Type.String(), email: Type.String(), name: Type.String(), role: Type.String() })

const TokenResponseSchema = Type.Object({
  access_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer()
})

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
  const keys = await loadOrCreateKeys(options.dataDir ?? DEFAULT_KEYS_DIR)
  const idp = Fastify({
    ...(options.logger === undefined ? { logger: false } : { loggerInstance: options.logger }),
    bodyLimit: 16 * 1024,
    // A malformed URL never reaches the error handler otherwise, and Fastify's own body names its internals.
    frameworkErrors: handleError
  })
  // JSON only, as on the API: a text body is 415, not a validation error.
  idp.removeContentTypeParser(['text/plain'])
  idp.setValidatorCompiler(compileValidator)
  idp.setErrorHandler(handleError)
  idp.setNotFoundHandler(async function (request, reply) {
    return await reply.code(404).send({ error: 'Not found' })
  })
  registerRoutes(idp, keys, { issuer: options.issuer, audience: options.audience })
  return idp
}
