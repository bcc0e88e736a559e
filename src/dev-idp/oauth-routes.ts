import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyInstance, FastifyReply, FastifyServerOptions } from 'fastify'
import { renderAuthorizePage } from './authorize-page.js'
import {
  checkAuthorizationRequest, checkChosenClaims, DEFAULT_FIELDS, exchangeCode, redirectWith,
  type AuthorizationRequest, type CodeStore, type OriginPolicy
} from './oauth.js'
import { TokenResponseSchema, type TokenSigner } from './tokens.js'

// GET and POST /authorize, and the form-encoded POST /token: the authorization-code grant with
// PKCE (RFC 6749 4.1, RFC 7636) that Swagger UI drives from the browser.

const FORM = 'application/x-www-form-urlencoded'

/** The media type of a Content-Type header, lower case and without parameters; '' without one. */
function mediaType (header: string | undefined): string {
  return header?.split(';', 1)[0]?.trim().toLowerCase() ?? ''
}

type ConstraintStrategy = NonNullable<NonNullable<FastifyServerOptions['routerOptions']>['constraints']>[string]

/**
 * A route constraint on the body's media type, so two routes share POST /token: the JSON one of
 * CONTRACT 3, untouched, and the OAuth token endpoint, which takes form-encoded bodies. A request
 * whose media type no route names goes to the route without the constraint.
 */
export const bodyTypeConstraint: ConstraintStrategy = {
  name: 'bodyType',
  storage () {
    const stores = new Map<string, Parameters<ReturnType<ConstraintStrategy['storage']>['set']>[1]>()
    return {
      get: (type) => stores.get(type) ?? null,
      set: (type, store) => { stores.set(type, store) }
    }
  },
  deriveConstraint: (req) => mediaType(req.headers['content-type']),
  validate (value) {
    if (typeof value !== 'string') throw new TypeError('the bodyType constraint is a media type such as application/json')
  },
  mustMatchWhenDerived: false
}

const PageSchema = Type.String()

const OAuthErrorSchema = Type.Object({ error: Type.String(), error_description: Type.Optional(Type.String()) })

type Params = Record<string, unknown>

/** A parsed body as parameters: a JSON array or scalar carries none. */
function paramsOf (body: unknown): Params {
  return typeof body === 'object' && body !== null && !Array.isArray(body) ? body as Params : {}
}

function page (reply: FastifyReply, request: AuthorizationRequest, html: string): string {
  // No script or style to allow; the form may post here and be redirected to the client only.
  reply.header('content-security-policy',
    `default-src 'none'; form-action 'self' ${new URL(request.redirectUri).origin}; frame-ancestors 'none'; base-uri 'none'`)
  reply.type('text/html; charset=utf-8')
  return html
}

export interface OAuthRoutesOptions {
  sign: TokenSigner
  codes: CodeStore
  allowed: OriginPolicy
}

export function registerOAuthRoutes (idp: FastifyInstance, { sign, codes, allowed }: OAuthRoutesOptions): void {
  const app = idp.withTypeProvider<TypeBoxTypeProvider>()

  // No querystring schema: a bad parameter is answered as RFC 6749 4.1.2.1 says, not with a
  // validation error. The page is answered to anyone; nothing on it is secret.
  app.get('/authorize', { schema: { response: { 200: PageSchema, 400: OAuthErrorSchema } } }, async function (request, reply) {
    reply.header('cache-control', 'no-store')
    const check = checkAuthorizationRequest(paramsOf(request.query), allowed)
    if (check.kind === 'fatal') {
      reply.code(400)
      return check.error
    }
    if (check.kind === 'redirect') return await reply.redirect(redirectWith(check.redirectUri, { ...check.error, state: check.state }), 303)
    return page(reply, check.request, renderAuthorizePage({ request: check.request, fields: DEFAULT_FIELDS }))
  })

  // The page's form. Everything is checked again: the hidden fields came back from the browser.
  app.post('/authorize', { schema: { response: { 200: PageSchema, 400: Type.Union([OAuthErrorSchema, PageSchema]) } } }, async function (request, reply) {
    reply.header('cache-control', 'no-store')
    const params = paramsOf(request.body)
    const check = checkAuthorizationRequest(params, allowed)
    if (check.kind === 'fatal') {
      reply.code(400)
      return check.error
    }
    if (check.kind === 'redirect') return await reply.redirect(redirectWith(check.redirectUri, { ...check.error, state: check.state }), 303)
    const { clientId, redirectUri, codeChallenge, state } = check.request
    if (params.decision === 'deny') {
      return await reply.redirect(redirectWith(redirectUri, { error: 'access_denied', error_description: 'The sign-in was cancelled', state }), 303)
    }
    const chosen = checkChosenClaims(params)
    if (!chosen.ok) {
      reply.code(400)
      return page(reply, check.request, renderAuthorizePage({ request: check.request, fields: chosen.fields, problems: chosen.problems }))
    }
    const code = codes.issue({ clientId, redirectUri, codeChallenge, claims: chosen.claims })
    return await reply.redirect(redirectWith(redirectUri, { code, state }), 303)
  })

  // RFC 6749 4.1.3 and 5: the code for a token, answered with the same body as the JSON route.
  app.post('/token', {
    constraints: { bodyType: FORM },
    schema: { response: { 200: TokenResponseSchema, 400: OAuthErrorSchema } }
  }, async function (request, reply) {
    reply.header('cache-control', 'no-store').header('pragma', 'no-cache')
    const exchange = exchangeCode(paramsOf(request.body), codes)
    if (!exchange.ok) {
      reply.code(400)
      return exchange.error
    }
    const { accessToken, expiresIn } = await sign(exchange.claims)
    return { access_token: accessToken, token_type: 'Bearer' as const, expires_in: expiresIn }
  })
}
