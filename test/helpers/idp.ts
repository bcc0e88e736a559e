import { createHmac, generateKeyPair, type KeyObject } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { promisify } from 'node:util'
import { calculateJwkThumbprint, CompactSign, createLocalJWKSet, exportJWK, jwtVerify, type JWK, type JWTPayload } from 'jose'
import type { Test } from 'tap'

// A real identity provider on a loopback port, independent of src/dev-idp, so auth tests can
// exercise rotation, outages and forged tokens against the API's real HTTP path.

export interface IdpKey {
  kid: string
  privateKey: KeyObject
  /** As served in the key set: kty, n, e, kid, alg RS256, use sig. */
  publicJwk: JWK
  /** SPKI PEM of the public key, byte for byte what jwk-to-pem and node:crypto produce. */
  publicPem: string
}

export interface TestClaims {
  sub?: string
  role?: string
  email?: string
  name?: string
  [claim: string]: unknown
}

export interface SignOptions {
  /** Header kid; null leaves it out. Defaults to the signing key's kid. */
  kid?: string | null
  /** Which key signs: the current one (default), 'foreign' (never in the key set), or the kid of a key in the set. */
  key?: string
  /** RS256 by default; 'none' gives an unsigned token. Other RSA algorithms are signed with the RSA key. */
  alg?: 'RS256' | 'RS384' | 'RS512' | 'PS256' | 'none'
  /** HS256 with the signing key's public PEM as the HMAC secret (the algorithm-confusion attack). */
  hs256WithPublicKey?: boolean
  /** HS256 with any secret. */
  hmacSecret?: string | Uint8Array
  /** Extra header parameters (jku, x5u, crit, ...). */
  header?: Record<string, unknown>
  /** Seconds from iat to exp; negative for a token that has already expired. Default 3600. */
  expiresIn?: number
  /** Seconds from now to nbf; no nbf unless given. */
  notBefore?: number
  iss?: string
  aud?: string | string[]
  /** Claims removed after defaults and overrides are applied, e.g. ['exp', 'sub']. */
  omit?: string[]
}

export interface Userinfo {
  sub: string
  email: string
  name: string
  role: string
}

/** A canned answer, or 'reset' to destroy the connection without answering. */
export type IdpReply = { status: number, body?: unknown, headers?: Record<string, string> } | 'reset'

export interface UserinfoContext {
  request: IncomingMessage
  /** The bearer token presented, if any. */
  token: string | undefined
  /** Claims of the token when it verifies against this provider's keys (any audience). */
  claims: JWTPayload | undefined
  /** What the default handler answers: 200 with userinfo, or 401. */
  defaultReply: IdpReply
}

export interface JwksContext {
  request: IncomingMessage
  /** What the default handler answers: 200 with the current key set. */
  defaultReply: IdpReply
}

export type UserinfoHandler = (context: UserinfoContext) => IdpReply | Promise<IdpReply>
export type JwksHandler = (context: JwksContext) => IdpReply | Promise<IdpReply>

export interface RecordedRequest {
  method: string
  path: string
  authorization: string | undefined
}

export interface TestIdp {
  /** The issuer: http://127.0.0.1:<port>, no trailing slash. */
  readonly url: string
  readonly audience: string
  readonly currentKid: string
  readonly kids: string[]
  readonly jwksRequests: number
  readonly userinfoRequests: number
  /** Every request received, down or not, in order. */
  readonly requests: RecordedRequest[]
  /** Replaces the userinfo route until set back to undefined. */
  userinfoHandler: UserinfoHandler | undefined
  /** Replaces the key set route until set back to undefined. */
  jwksHandler: JwksHandler | undefined
  sign: (claims?: TestClaims, options?: SignOptions) => Promise<string>
  key: (kid?: string) => IdpKey
  jwks: () => { keys: JWK[] }
  /** Adds a key that becomes current and returns its kid; the old keys stay unless removeOld. */
  rotate: (options?: { removeOld?: boolean }) => Promise<string>
  removeKey: (kid: string) => void
  /** While down every route answers 503, or drops the connection ('reset'), or never answers ('hang'). */
  setDown: (down: boolean, mode?: 'status' | 'reset' | 'hang') => void
  resetCounts: () => void
  /** Closes the listener and every connection: requests are refused, as when the provider is gone. */
  stop: () => Promise<void>
  /** Listens again on the same port, with the same keys. */
  restart: () => Promise<void>
  /** Resolves after ms, or at once when the provider closes, so a slow handler never outlives a test. */
  wait: (ms: number) => Promise<void>
  close: () => Promise<void>
}

export interface TestIdpOptions {
  audience: string
}

const generateRsaKeyPair = promisify(generateKeyPair)

async function createKey (): Promise<IdpKey> {
  const { privateKey, publicKey } = await generateRsaKeyPair('rsa', { modulusLength: 2048 })
  const jwk = await exportJWK(publicKey)
  const kid = await calculateJwkThumbprint(jwk)
  const publicPem = publicKey.export({ type: 'spki', format: 'pem' }) as string
  return { kid, privateKey, publicJwk: { kty: jwk.kty, n: jwk.n, e: jwk.e, kid, alg: 'RS256', use: 'sig' }, publicPem }
}

const encodeSegment = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')

function hmacToken (header: Record<string, unknown>, payload: JWTPayload, secret: string | Uint8Array): string {
  const signingInput = `${encodeSegment({ ...header, alg: 'HS256' })}.${encodeSegment(payload)}`
  return `${signingInput}.${createHmac('sha256', secret).update(signingInput).digest('base64url')}`
}

async function rsaToken (header: Record<string, unknown>, payload: JWTPayload, key: KeyObject): Promise<string> {
  return await new CompactSign(Buffer.from(JSON.stringify(payload)))
    .setProtectedHeader(header as { alg: string })
    .sign(key)
}

function buildPayload (url: string, audience: string, claims: TestClaims, options: SignOptions): JWTPayload {
  const now = Math.floor(Date.now() / 1000)
  const sub = claims.sub ?? 'user-1'
  const iat = typeof claims.iat === 'number' ? claims.iat : now
  const payload: JWTPayload = {
    iss: url,
    aud: audience,
    sub,
    role: 'User',
    email: `${sub}@example.com`,
    name: sub,
    iat,
    exp: iat + (options.expiresIn ?? 3600),
    ...(options.notBefore === undefined ? {} : { nbf: now + options.notBefore }),
    ...claims
  }
  if (options.iss !== undefined) payload.iss = options.iss
  if (options.aud !== undefined) payload.aud = options.aud
  for (const claim of options.omit ?? []) Reflect.deleteProperty(payload, claim)
  return payload
}

/** userinfo as the default provider answers it, from verified claims. */
export function userinfoOf (claims: JWTPayload): Userinfo {
  const text = (value: unknown, fallback: string): string => typeof value === 'string' ? value : fallback
  const sub = text(claims.sub, '')
  return { sub, email: text(claims.email, `${sub}@example.com`), name: text(claims.name, sub), role: text(claims.role, 'User') }
}

function send (res: ServerResponse, reply: IdpReply): void {
  if (res.destroyed) return
  if (reply === 'reset') {
    res.socket?.destroy()
    return
  }
  const body = reply.body === undefined ? '' : typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body)
  res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers })
  res.end(body)
}

const BEARER = /^Bearer (\S+)$/i

async function listenOnLoopback (server: Server, port = 0): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

async function closeServer (server: Server): Promise<void> {
  if (!server.listening) return
  const closed = new Promise<void>((resolve) => server.close(() => resolve()))
  server.closeAllConnections()
  await closed
}

/** Starts a loopback identity provider with one key; it closes when the test ends. */
export async function startTestIdp (t: Test, options: TestIdpOptions): Promise<TestIdp> {
  let keys = [await createKey()]
  let foreign: IdpKey | undefined
  let down: false | 'status' | 'reset' | 'hang' = false
  const requests: RecordedRequest[] = []
  const waiting = new Set<() => void>()
  let url = ''

  const current = (): IdpKey => {
    const key = keys.at(-1)
    if (key === undefined) throw new Error('the test identity provider has no keys left')
    return key
  }
  const publicKeys = (): JWK[] => keys.map((key) => key.publicJwk)
  const count = (path: string): number => requests.filter((request) => request.path === path).length

  async function verify (token: string | undefined): Promise<JWTPayload | undefined> {
    if (token === undefined) return undefined
    try {
      const { payload } = await jwtVerify(token, createLocalJWKSet({ keys: publicKeys() }), { issuer: url, algorithms: ['RS256'] })
      return payload
    } catch {
      return undefined
    }
  }

  async function userinfo (request: IncomingMessage): Promise<IdpReply> {
    const token = BEARER.exec(request.headers.authorization ?? '')?.[1]
    const claims = await verify(token)
    const defaultReply: IdpReply = claims === undefined
      ? { status: 401, body: { error: 'Invalid or missing token' }, headers: { 'www-authenticate': 'Bearer' } }
      : { status: 200, body: userinfoOf(claims) }
    return idp.userinfoHandler === undefined ? defaultReply : await idp.userinfoHandler({ request, token, claims, defaultReply })
  }

  async function jwks (request: IncomingMessage): Promise<IdpReply> {
    const defaultReply: IdpReply = { status: 200, body: { keys: publicKeys() } }
    return idp.jwksHandler === undefined ? defaultReply : await idp.jwksHandler({ request, defaultReply })
  }

  async function route (request: IncomingMessage, path: string): Promise<IdpReply | undefined> {
    if (down === 'hang') return undefined
    if (down === 'reset') return 'reset'
    if (down === 'status') return { status: 503, body: { error: 'Service unavailable' } }
    if (request.method === 'GET' && path === '/.well-known/jwks.json') return await jwks(request)
    if (request.method === 'GET' && path === '/v2/oauth/userinfo') return await userinfo(request)
    return { status: 404, body: { error: 'Not found' } }
  }

  const server = createServer(function (request, res) {
    const path = new URL(request.url ?? '/', url).pathname
    requests.push({ method: request.method ?? 'GET', path, authorization: request.headers.authorization })
    route(request, path).then(
      (reply) => { if (reply !== undefined) send(res, reply) },
      (err: unknown) => send(res, { status: 500, body: { error: String(err) } })
    )
  })
  url = await listenOnLoopback(server)

  function signingKey (choice: SignOptions['key']): IdpKey {
    if (choice === undefined || choice === 'current') return current()
    if (choice === 'foreign') {
      if (foreign === undefined) throw new Error('foreign key not created')
      return foreign
    }
    return idp.key(choice)
  }

  const idp: TestIdp = {
    url,
    audience: options.audience,
    get currentKid () { return current().kid },
    get kids () { return keys.map((key) => key.kid) },
    get jwksRequests () { return count('/.well-known/jwks.json') },
    get userinfoRequests () { return count('/v2/oauth/userinfo') },
    requests,
    userinfoHandler: undefined,
    jwksHandler: undefined,

    async sign (claims = {}, signOptions = {}) {
      if (signOptions.key === 'foreign') foreign ??= await createKey()
      const key = signingKey(signOptions.key)
      const payload = buildPayload(url, options.audience, claims, signOptions)
      const alg = signOptions.alg ?? 'RS256'
      const kid = signOptions.kid === undefined ? { kid: key.kid } : signOptions.kid === null ? {} : { kid: signOptions.kid }
      const header: Record<string, unknown> = { alg, typ: 'JWT', ...kid, ...signOptions.header }
      const secret = signOptions.hmacSecret ?? (signOptions.hs256WithPublicKey === true ? key.publicPem : undefined)
      if (secret !== undefined) return hmacToken(header, payload, secret)
      if (alg === 'none') return `${encodeSegment(header)}.${encodeSegment(payload)}.`
      return await rsaToken(header, payload, key.privateKey)
    },

    key (kid) {
      if (kid === undefined) return current()
      const key = keys.find((candidate) => candidate.kid === kid)
      if (key === undefined) throw new Error(`no key with kid ${kid}`)
      return key
    },

    jwks () {
      return { keys: publicKeys() }
    },

    async rotate ({ removeOld = false } = {}) {
      const key = await createKey()
      keys = removeOld ? [key] : [...keys, key]
      return key.kid
    },

    removeKey (kid) {
      keys = keys.filter((key) => key.kid !== kid)
    },

    setDown (isDown, mode = 'status') {
      down = isDown ? mode : false
    },

    resetCounts () {
      requests.length = 0
    },

    async stop () {
      await closeServer(server)
    },

    async restart () {
      await listenOnLoopback(server, Number(new URL(url).port))
    },

    async wait (ms) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer)
          waiting.delete(done)
          resolve()
        }
        const timer = setTimeout(done, ms)
        waiting.add(done)
      })
    },

    async close () {
      for (const done of [...waiting]) done()
      await closeServer(server)
    }
  }

  t.teardown(() => idp.close())
  return idp
}

export interface Recorder {
  readonly url: string
  readonly count: number
  readonly requests: RecordedRequest[]
  close: () => Promise<void>
}

/** A loopback server that answers 404 to everything and remembers each request it got. */
export async function startRecorder (t: Test): Promise<Recorder> {
  const requests: RecordedRequest[] = []
  let url = ''
  const server = createServer(function (request, res) {
    requests.push({ method: request.method ?? 'GET', path: new URL(request.url ?? '/', url).pathname, authorization: request.headers.authorization })
    send(res, { status: 404, body: { error: 'Not found' } })
  })
  url = await listenOnLoopback(server)
  const recorder: Recorder = {
    url,
    get count () { return requests.length },
    requests,
    close: async () => await closeServer(server)
  }
  t.teardown(() => recorder.close())
  return recorder
}
