// auth: the authentication chain of SPEC 5.2 (verifyJwt → attachUser → handleAuthError), and the caller it yields (callerOf).
import fastifyJwt from '@fastify/jwt'
import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { createKeyResolver } from '../src/auth/jwks.js'
import type { Caller } from '../src/users/local-user.js'
import { DEFAULT_ROLE } from '../src/auth/roles.js'
import { VerifiedTokens } from '../src/auth/verified-tokens.js'
import { stripTrailingSlash } from '../src/config.js'
import { UnauthorizedError } from '../src/errors.js'
import { isStorableText } from '../src/schemas/common.js'

/** SPEC 2.3 / CONTRACT 4: the request-scoped caller, copied from verified claims. */
export interface AuthenticatedUser {
  sub: string
  role: string
  email?: string
  name?: string
}

declare module '@fastify/jwt' {
  interface FastifyJWT {
    payload: { sub?: unknown, role?: unknown, email?: unknown, name?: unknown }
    user: AuthenticatedUser | null
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** onRequest hook: the whole authentication chain. Every failure is 401 Invalid or missing token. */
    authenticate: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
    /** The authenticated caller, as the users capability takes one (its subject, role and userinfo). */
    callerOf: (request: FastifyRequest) => Caller
  }
}

export interface AuthPluginOptions {
  issuer: string
  audience: string
  /** SPEC 5.7: the x-test-user stub instead of token verification. Code only, never the environment. */
  testAuth?: boolean
  upstreamTimeoutMs?: number
  /** How long after a key-set fetch a kid the set does not hold may cause another (CONTRACT 4: 30 s). Code only. */
  unknownKidIntervalMs?: number
  /** JWKS_MAX_AGE_S: the longest a fetched key set is trusted (CONTRACT 16). */
  jwksMaxAgeS?: number
}

const CLOCK_TOLERANCE_MS = 5000
const VERIFIED_TOKENS = 10_000
// A verified token is verified again at least this often, whatever its exp.
const VERIFIED_MAX_AGE_MS = 10 * 60_000
// CONTRACT 10: "Bearer", one space, the token; the scheme is case-insensitive.
const BEARER = /^Bearer ([^\s]+)$/i
const PRESENTED_BEARER = /^Bearer\s+\S/i

const optionalString = (value: unknown): string | undefined => typeof value === 'string' ? value : undefined

/** attachUser: the claims the service reads, typed. A missing role is User (CONTRACT 4). */
export function formatUser (claims: { sub?: unknown, role?: unknown, email?: unknown, name?: unknown }): AuthenticatedUser {
  // The subject keys the local user: one PostgreSQL cannot store as sent (a NUL, a lone surrogate,
  // which it would store as U+FFFD and so merge two subjects) identifies no one.
  if (typeof claims.sub !== 'string' || claims.sub.length === 0 || !isStorableText(claims.sub)) throw new UnauthorizedError()
  const user: AuthenticatedUser = { sub: claims.sub, role: typeof claims.role === 'string' ? claims.role : DEFAULT_ROLE }
  const email = optionalString(claims.email)
  const name = optionalString(claims.name)
  if (email !== undefined) user.email = email
  if (name !== undefined) user.name = name
  return user
}

export function bearerToken (request: FastifyRequest): string | undefined {
  const header = request.headers.authorization
  return header === undefined ? undefined : BEARER.exec(header)?.[1]
}

export default fp<AuthPluginOptions>(async function auth (app, opts) {
  const issuer = stripTrailingSlash(opts.issuer)
  const resolveKey = createKeyResolver({
    issuer,
    timeoutMs: opts.upstreamTimeoutMs,
    unknownKidIntervalMs: opts.unknownKidIntervalMs,
    maxAgeMs: opts.jwksMaxAgeS === undefined ? undefined : opts.jwksMaxAgeS * 1000
  })
  app.addHook('onClose', async () => { await resolveKey.close() })
  const keyUsed = new WeakMap<FastifyRequest, { header: { alg?: unknown, kid?: unknown }, pem: string, exp: unknown }>()

  await app.register(fastifyJwt, {
    // Verify-only: the key is looked up per token, always at the configured issuer (never iss/jku/x5u).
    secret: {
      public: async (request: FastifyRequest, token: { header: { alg?: unknown, kid?: unknown }, payload: { exp?: unknown } }) => {
        const pem = await resolveKey(token.header)
        // What verified it, kept for remember(): the token is not decoded nor its key resolved twice.
        keyUsed.set(request, { header: { alg: token.header.alg, kid: token.header.kid }, pem, exp: token.payload.exp })
        return pem
      }
    },
    decode: { complete: true },
    verify: {
      algorithms: ['RS256'],
      allowedAud: opts.audience,
      // CONTRACT 2: one trailing slash on either side is ignored.
      allowedIss: [issuer, `${issuer}/`],
      requiredClaims: ['sub', 'iss', 'aud', 'exp'],
      clockTolerance: CLOCK_TOLERANCE_MS,
      // Verified tokens are remembered below (verifyJwt), keyed by the token itself; fast-jwt's own cache
      // would hash every token with SHA-256 on every request, a tenth of an authenticated request's time.
      cache: false,
      extractToken: (request: FastifyRequest) => bearerToken(request)
    },
    formatUser
  } as Parameters<typeof fastifyJwt>[1])

  const verified = new VerifiedTokens<AuthenticatedUser>(VERIFIED_TOKENS)

  async function verifyJwt (request: FastifyRequest): Promise<void> {
    if (opts.testAuth === true) {
      request.user = testUser(request.headers['x-test-user'])
      return
    }
    const token = bearerToken(request)
    const now = Date.now()
    if (token !== undefined) {
      const hit = verified.get(token, now)
      // The key must still be the one that verified it: a key gone from the key set retires its tokens.
      if (hit !== undefined && await resolveKey(hit.header).catch(() => undefined) === hit.pem) {
        request.user = hit.user
        return
      }
      if (hit !== undefined) verified.delete(token)
    }
    await request.jwtVerify()
    if (token !== undefined && request.user !== null) remember(request, token, request.user, now)
  }

  /** After a full verification: the token, its user, the key that verified it and how long it holds. */
  function remember (request: FastifyRequest, token: string, user: AuthenticatedUser, now: number): void {
    const used = keyUsed.get(request)
    if (used === undefined || typeof used.exp !== 'number') return
    verified.set(token, { user: Object.freeze(user), header: used.header, pem: used.pem, until: Math.min(used.exp * 1000 + CLOCK_TOLERANCE_MS, now + VERIFIED_MAX_AGE_MS) })
  }

  function attachUser (request: FastifyRequest, reply: FastifyReply): void {
    if (request.user === null) throw new UnauthorizedError()
    reply.header('cache-control', 'no-store')
  }

  async function handleAuthError (request: FastifyRequest, reply: FastifyReply, err: unknown): Promise<never> {
    request.user = null
    request.log.info({ reason: (err as Error).message }, 'authentication failed')
    // A refused token still counts against its address (429 past the limit): bad tokens are not free to send.
    await app.countRefused(request, reply)
    // RFC 6750 3.1: name the scheme; add invalid_token only when a bearer token was presented
    // (no header, another scheme or an empty Bearer carry no error code).
    reply.header('www-authenticate', PRESENTED_BEARER.test(request.headers.authorization ?? '') ? 'Bearer error="invalid_token"' : 'Bearer')
    throw new UnauthorizedError()
  }

  app.decorate('authenticate', async function authenticate (request: FastifyRequest, reply: FastifyReply) {
    try {
      await verifyJwt(request)
      attachUser(request, reply)
    } catch (err) {
      await handleAuthError(request, reply, err)
    }
  })

  /** The authenticated caller as the users capability sees one: its claims, and the token its userinfo is fetched with. */
  function callerOf (request: FastifyRequest): Caller {
    const user = request.user
    if (user === null) throw new UnauthorizedError()
    // Under the test stub there is no token: the claims are the whole profile (SPEC 5.7).
    const token = opts.testAuth === true ? undefined : bearerToken(request)
    return { sub: user.sub, role: user.role, email: user.email, name: user.name, token }
  }

  app.decorate('callerOf', callerOf)
}, { name: 'auth', fastify: '5.x', dependencies: ['rate-limit'] })

/** SPEC 5.7 stub: `x-test-user: {"sub":"alice","role":"Admin"}`. Anything unreadable is 401. */
function testUser (header: string | string[] | undefined): AuthenticatedUser {
  if (typeof header !== 'string') throw new UnauthorizedError()
  let claims: unknown
  try {
    claims = JSON.parse(header)
  } catch {
    throw new UnauthorizedError()
  }
  if (typeof claims !== 'object' || claims === null) throw new UnauthorizedError()
  return formatUser(claims)
}
