import { Type, type Static } from '@sinclair/typebox'
import { jwtVerify, SignJWT, type JWTPayload } from 'jose'
import { DbText } from '../schemas/common.js'
import { KEY_ALG, type DevIdpKeys } from './keys.js'

export const DEFAULT_EXPIRES_IN = 3600
export const MAX_EXPIRES_IN = 86400

// The claims a local user is stored from are text PostgreSQL can hold (DbText): no NUL, no lone surrogate.
export const TokenRequestSchema = Type.Object({
  sub: DbText({ required: true, maxLength: 200 }),
  role: Type.String({ minLength: 1, maxLength: 50, pattern: '\\S' }),
  email: Type.Optional(DbText({ minLength: 1, maxLength: 254 })),
  name: Type.Optional(DbText({ minLength: 1, maxLength: 200 })),
  aud: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  expiresIn: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_EXPIRES_IN, default: DEFAULT_EXPIRES_IN }))
})
export type TokenRequest = Static<typeof TokenRequestSchema>

/** The answer of POST /token, for a JSON request and for an authorization code alike (RFC 6749 5.1). */
export const TokenResponseSchema = Type.Object({
  access_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer()
})

export interface TokenSignerOptions {
  /** The `iss` of every token, without a trailing slash. */
  issuer: string
  /** The `aud` when a request names none. */
  audience: string
}

export interface IssuedToken {
  accessToken: string
  expiresIn: number
}

export type TokenSigner = (request: TokenRequest) => Promise<IssuedToken>

export interface UserinfoClaims {
  sub: string
  email: string
  name: string
  role: string
}

/** Mints RS256 access tokens with the given keys; no HTTP involved, so a benchmark can mint thousands. */
export function createTokenSigner (keys: DevIdpKeys, options: TokenSignerOptions): TokenSigner {
  return async function sign (request) {
    const expiresIn = request.expiresIn ?? DEFAULT_EXPIRES_IN
    const iat = Math.floor(Date.now() / 1000)
    const accessToken = await new SignJWT({
      role: request.role,
      email: request.email ?? `${request.sub}@example.com`,
      name: request.name ?? request.sub
    })
      .setProtectedHeader({ alg: KEY_ALG, kid: keys.kid, typ: 'JWT' })
      .setIssuer(options.issuer)
      .setAudience(request.aud ?? options.audience)
      .setSubject(request.sub)
      .setIssuedAt(iat)
      .setExpirationTime(iat + expiresIn)
      .sign(keys.privateKey)
    return { accessToken, expiresIn }
  }
}

/** One token, for callers that mint a single one. */
export async function mintToken (keys: DevIdpKeys, options: TokenSignerOptions, request: TokenRequest): Promise<string> {
  return (await createTokenSigner(keys, options)(request)).accessToken
}

const text = (value: unknown, fallback: string): string => typeof value === 'string' ? value : fallback

function userinfoOf (payload: JWTPayload): UserinfoClaims {
  const sub = text(payload.sub, '')
  return { sub, email: text(payload.email, `${sub}@example.com`), name: text(payload.name, sub), role: text(payload.role, 'User') }
}

/** The claims of a token this provider minted itself, for any audience; throws for anything else. */
export async function verifyOwnToken (keys: DevIdpKeys, issuer: string, token: string): Promise<UserinfoClaims> {
  const { payload } = await jwtVerify(token, keys.publicKey, { issuer, algorithms: [KEY_ALG], requiredClaims: ['sub', 'exp'] })
  return userinfoOf(payload)
}
