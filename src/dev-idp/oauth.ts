import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { DEFAULT_ROLE, isRole, ROLES, type Role } from '../auth/roles.js'
import { isStorableText } from '../schemas/common.js'

// The OAuth 2.0 authorization-code grant with PKCE (RFC 6749 section 4.1, RFC 7636) as the
// development identity provider speaks it, so Swagger UI can sign in by itself. Everything here
// is plain logic; app.ts and oauth-routes.ts only wire it into HTTP.

export const DEFAULT_CODE_TTL_MS = 60_000
export const DEFAULT_MAX_CODES = 1000
export const DEFAULT_SUBJECT = 'dev-user'

/** RFC 6749 section 4.1.2.1 and 5.2 error codes used here. */
export type OAuthErrorCode =
  'invalid_request' | 'unsupported_response_type' | 'access_denied' | 'invalid_grant' | 'unsupported_grant_type'

export interface OAuthError {
  error: OAuthErrorCode
  error_description: string
}

// ---------------------------------------------------------------------------------------------
// Which browser origins may receive codes (redirect_uri) and read answers (CORS).

/** True for an origin (scheme, host, port) the provider trusts. */
export type OriginPolicy = (origin: string) => boolean

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]'])

/**
 * A Host header that names a loopback host, with or without a port (`localhost:3002`, `[::1]`). A
 * page on another site that points its own name at 127.0.0.1 (DNS rebinding) sends that name.
 */
export function isLoopbackHost (host: string | undefined): boolean {
  const name = host === undefined ? undefined : /^(.*?)(?::\d{1,5})?$/.exec(host.toLowerCase())?.[1]
  return name !== undefined && LOOPBACK_HOSTS.has(name)
}

function parseHttpUrl (value: string): URL | undefined {
  if (!URL.canParse(value)) return undefined
  const url = new URL(value)
  return url.protocol === 'http:' || url.protocol === 'https:' ? url : undefined
}

/**
 * The allowed origins as given, or by default any http origin on a loopback host, any port.
 * Throws for an entry that is not an http(s) origin, so a typo fails at start-up, not at sign-in.
 */
export function createOriginPolicy (allowedOrigins?: readonly string[]): OriginPolicy {
  if (allowedOrigins === undefined) {
    return (origin) => {
      const url = parseHttpUrl(origin)
      return url !== undefined && url.protocol === 'http:' && url.origin === origin && LOOPBACK_HOSTS.has(url.hostname)
    }
  }
  const listed = new Set(allowedOrigins.map((entry) => {
    const url = parseHttpUrl(entry)
    if (url === undefined || url.pathname !== '/' || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
      throw new Error(`allowedOrigins: ${JSON.stringify(entry)} is not an http(s) origin such as http://localhost:3001`)
    }
    return url.origin
  }))
  return (origin) => listed.has(origin)
}

// ---------------------------------------------------------------------------------------------
// Request parameters (RFC 6749 section 3.1): a parameter sent without a value is treated as
// omitted, one sent more than once is an error, and unknown ones are ignored.

type Params = Record<string, unknown>

/** A parameter given more than once, or not as text. */
const BAD = Symbol('bad parameter')

/** A parameter's one value: undefined when it is absent or empty, BAD when it is not one string. */
function param (params: Params, name: string): string | undefined | typeof BAD {
  const value = params[name]
  if (value === undefined || value === '') return undefined
  return typeof value === 'string' ? value : BAD
}

// RFC 6749 appendix A: client_id and state are VSCHAR (printable ASCII).
const VSCHAR = /^[\x20-\x7E]+$/
// RFC 7636 section 4.1 and 4.2: 43 to 128 unreserved characters.
const PKCE_VALUE = /^[A-Za-z0-9\-._~]{43,128}$/
// RFC 3986: a URI is printable ASCII without spaces.
const URI_CHARS = /^[\x21-\x7E]+$/
const MAX_CLIENT_ID = 200
const MAX_REDIRECT_URI = 2000
const MAX_STATE = 1000
const MAX_SCOPE = 1000

function invalid (description: string): OAuthError {
  return { error: 'invalid_request', error_description: description }
}

/** What an authorization request stands for once it is valid. */
export interface AuthorizationRequest {
  clientId: string
  redirectUri: string
  codeChallenge: string
  state?: string
  scope?: string
}

export type AuthorizationCheck =
  /** Neither the client nor its redirect_uri can be trusted: tell the user, never redirect (RFC 6749 4.1.2.1). */
  | { kind: 'fatal', error: OAuthError }
  /** The redirect_uri is good: the error goes back to the client there, with the state. */
  | { kind: 'redirect', redirectUri: string, state?: string, error: OAuthError }
  | { kind: 'valid', request: AuthorizationRequest }

function checkRedirectUri (value: string, allowed: OriginPolicy): string | undefined {
  if (value.length > MAX_REDIRECT_URI) return `redirect_uri must be at most ${MAX_REDIRECT_URI} characters`
  const url = parseHttpUrl(value)
  // RFC 6749 3.1.2: absolute, without a fragment; credentials in it would be sent on to the client.
  // Spaces and control characters are refused rather than silently dropped by the URL parser.
  if (url === undefined || !URI_CHARS.test(value) || value.includes('#') || url.username !== '' || url.password !== '') {
    return 'redirect_uri must be an absolute http(s) URL without credentials or fragment'
  }
  if (!allowed(url.origin)) return `redirect_uri is not allowed: the origin ${url.origin} is not one this provider trusts`
  return undefined
}

/** GET and POST /authorize: every parameter, in the order RFC 6749 4.1.2.1 asks. */
export function checkAuthorizationRequest (params: Params, allowed: OriginPolicy): AuthorizationCheck {
  const clientId = param(params, 'client_id')
  if (typeof clientId !== 'string' || clientId.length > MAX_CLIENT_ID || !VSCHAR.test(clientId)) {
    return { kind: 'fatal', error: invalid(`client_id is required: one value of at most ${MAX_CLIENT_ID} printable characters`) }
  }
  const redirectUri = param(params, 'redirect_uri')
  if (typeof redirectUri !== 'string') {
    return { kind: 'fatal', error: invalid(redirectUri === BAD ? 'redirect_uri must be given once' : 'redirect_uri is required') }
  }
  const redirectProblem = checkRedirectUri(redirectUri, allowed)
  if (redirectProblem !== undefined) return { kind: 'fatal', error: invalid(redirectProblem) }

  const fail = (error: OAuthError, state?: string): AuthorizationCheck => ({ kind: 'redirect', redirectUri, state, error })
  const state = param(params, 'state')
  if (state === BAD || (state !== undefined && (state.length > MAX_STATE || !VSCHAR.test(state)))) {
    return fail(invalid(`state must be one value of at most ${MAX_STATE} printable characters`))
  }
  const responseType = param(params, 'response_type')
  if (typeof responseType !== 'string') return fail(invalid('response_type is required, once'), state)
  if (responseType !== 'code') {
    return fail({ error: 'unsupported_response_type', error_description: 'Only response_type=code is supported' }, state)
  }
  const challenge = param(params, 'code_challenge')
  if (typeof challenge !== 'string' || !PKCE_VALUE.test(challenge)) {
    return fail(invalid('code_challenge is required: 43 to 128 characters of A-Z a-z 0-9 - . _ ~ (PKCE)'), state)
  }
  if (param(params, 'code_challenge_method') !== 'S256') return fail(invalid('code_challenge_method must be S256'), state)
  const scope = param(params, 'scope')
  if (scope === BAD || (scope !== undefined && scope.length > MAX_SCOPE)) {
    return fail(invalid(`scope must be one value of at most ${MAX_SCOPE} characters`), state)
  }

  return {
    kind: 'valid',
    request: {
      clientId,
      redirectUri,
      codeChallenge: challenge,
      ...(state === undefined ? {} : { state }),
      ...(scope === undefined ? {} : { scope })
    }
  }
}

/**
 * The redirect_uri with the answer appended to its query, which is kept as the client wrote it.
 * Values are percent-encoded (spaces as %20, not +): Swagger UI's oauth2-redirect.html decodes
 * them with decodeURIComponent.
 */
export function redirectWith (redirectUri: string, answer: Record<string, string | undefined>): string {
  const pairs = Object.entries(answer)
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([name, value]) => `${name}=${encodeURIComponent(value)}`)
  const url = new URL(redirectUri)
  url.search = url.search === '' ? pairs.join('&') : `${url.search.slice(1)}&${pairs.join('&')}`
  return url.href
}

// ---------------------------------------------------------------------------------------------
// The developer's choice on the sign-in page.

/** The claims a developer picks on the page; they become the token's. */
export interface ChosenClaims {
  sub: string
  role: Role
  name?: string
  email?: string
}

/** What the form fields held, as text, to print them back when they need correcting. */
export interface ClaimFields {
  sub: string
  role: string
  name: string
  email: string
}

export const DEFAULT_FIELDS: ClaimFields = { sub: DEFAULT_SUBJECT, role: DEFAULT_ROLE, name: '', email: '' }

export type ClaimsCheck = { ok: true, claims: ChosenClaims } | { ok: false, fields: ClaimFields, problems: string[] }

const text = (value: unknown): string => typeof value === 'string' ? value : ''

/** The sign-in form's fields, checked with the same bounds as JSON POST /token; the role must be a known one. */
export function checkChosenClaims (params: Params): ClaimsCheck {
  const fields = { sub: text(params.sub), role: text(params.role), name: text(params.name), email: text(params.email) }
  const once = (name: string): boolean => params[name] === undefined || typeof params[name] === 'string'
  const { sub, role, name, email } = fields
  const problems: string[] = []
  if (!once('sub') || sub.length > 200 || !/\S/.test(sub)) problems.push('Subject is required: at most 200 characters, not only spaces')
  if (!once('role') || !isRole(role)) problems.push(`Role must be one of ${ROLES.join(', ')}`)
  if (!once('name') || name.length > 200) problems.push('Name must be at most 200 characters')
  if (!once('email') || email.length > 254) problems.push('Email must be at most 254 characters')
  if (![sub, name, email].every(isStorableText)) problems.push('Subject, name and email must be valid Unicode text without NUL characters')
  if (problems.length > 0 || !isRole(role)) return { ok: false, fields, problems }
  return { ok: true, claims: { sub, role, ...(name === '' ? {} : { name }), ...(email === '' ? {} : { email }) } }
}

// ---------------------------------------------------------------------------------------------
// Authorization codes: random, single use, short-lived, bounded in number, kept in memory only.

/** What a code stands for. */
export interface Grant {
  clientId: string
  redirectUri: string
  codeChallenge: string
  claims: ChosenClaims
}

export interface CodeStore {
  /** A new code for the grant; the oldest outstanding code is dropped when the store is full. */
  issue: (grant: Grant) => string
  /** The grant of an unexpired code, which is used up by this call whatever happens next. */
  take: (code: string) => Grant | undefined
  /** How many codes are outstanding (expired ones may still be counted until the next issue). */
  readonly size: number
}

export interface CodeStoreOptions {
  ttlMs?: number
  maxCodes?: number
  now?: () => number
}

export function createCodeStore ({ ttlMs = DEFAULT_CODE_TTL_MS, maxCodes = DEFAULT_MAX_CODES, now = Date.now }: CodeStoreOptions = {}): CodeStore {
  if (!Number.isSafeInteger(ttlMs) || ttlMs < 1) throw new Error('the authorization code lifetime must be a positive number of milliseconds')
  if (!Number.isSafeInteger(maxCodes) || maxCodes < 1) throw new Error('the number of outstanding authorization codes must be a positive integer')
  // Insertion order is issue order and every code lives equally long: expired codes are at the front.
  const codes = new Map<string, Grant & { expiresAt: number }>()

  function sweep (at: number): void {
    for (const [code, entry] of codes) {
      if (entry.expiresAt > at) return
      codes.delete(code)
    }
  }

  return {
    issue (grant) {
      const at = now()
      sweep(at)
      for (const oldest of codes.keys()) {
        if (codes.size < maxCodes) break
        codes.delete(oldest)
      }
      // 256 bits, base64url: 43 characters that need no encoding in a URL.
      const code = randomBytes(32).toString('base64url')
      codes.set(code, { ...grant, expiresAt: at + ttlMs })
      return code
    },
    take (code) {
      const entry = codes.get(code)
      if (entry === undefined) return undefined
      codes.delete(code)
      if (entry.expiresAt <= now()) return undefined
      const { expiresAt, ...grant } = entry
      return grant
    },
    get size () {
      return codes.size
    }
  }
}

/** RFC 7636 section 4.6: BASE64URL(SHA256(code_verifier)) equals the code_challenge. */
export function verifierMatches (verifier: string, challenge: string): boolean {
  const computed = Buffer.from(createHash('sha256').update(verifier, 'ascii').digest('base64url'))
  const expected = Buffer.from(challenge)
  return computed.length === expected.length && timingSafeEqual(computed, expected)
}

// ---------------------------------------------------------------------------------------------
// The token request (RFC 6749 section 4.1.3).

/** A parameter the token request must carry once, or the invalid_request its absence is. */
function required (params: Params, name: string): string | OAuthError {
  const value = param(params, name)
  if (value === BAD) return invalid(`${name} must be given once`)
  return value ?? invalid(`${name} is required`)
}

export type TokenExchange = { ok: true, claims: ChosenClaims } | { ok: false, error: OAuthError }

/**
 * A form-encoded token request checked against the code it presents. A well-formed request uses
 * the code up, even when the check then fails: a code is presented once.
 */
export function exchangeCode (params: Params, codes: CodeStore): TokenExchange {
  const fail = (error: OAuthErrorCode, description: string): TokenExchange => ({ ok: false, error: { error, error_description: description } })
  const grantType = param(params, 'grant_type')
  if (typeof grantType !== 'string') return fail('invalid_request', 'grant_type is required, once')
  if (grantType !== 'authorization_code') return fail('unsupported_grant_type', 'Only grant_type=authorization_code is supported')
  const code = required(params, 'code')
  if (typeof code !== 'string') return { ok: false, error: code }
  const redirectUri = required(params, 'redirect_uri')
  if (typeof redirectUri !== 'string') return { ok: false, error: redirectUri }
  const clientId = required(params, 'client_id')
  if (typeof clientId !== 'string') return { ok: false, error: clientId }
  const verifier = required(params, 'code_verifier')
  if (typeof verifier !== 'string') return { ok: false, error: verifier }
  if (!PKCE_VALUE.test(verifier)) return fail('invalid_request', 'code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~')

  const grant = codes.take(code)
  if (grant === undefined) return fail('invalid_grant', 'The code is unknown, expired or already used')
  if (grant.clientId !== clientId) return fail('invalid_grant', 'The code was issued to another client')
  if (grant.redirectUri !== redirectUri) return fail('invalid_grant', 'redirect_uri differs from the one of the authorization request')
  if (!verifierMatches(verifier, grant.codeChallenge)) return fail('invalid_grant', 'code_verifier does not match the code_challenge')
  return { ok: true, claims: grant.claims }
}
