// cors: which browser origins may call the API and read its answers (CONTRACT 12 "Browsers").
import cors from '@fastify/cors'
import fp from 'fastify-plugin'
import { resourcePolicyFor } from '../src/http/resource-policy.js'

export interface CorsPluginOptions {
  /** Allowed origins in the form of an Origin header, or '*' for any. */
  origins: '*' | readonly string[]
}

export const CORS_METHODS = ['GET', 'HEAD', 'POST', 'DELETE', 'OPTIONS']
// Last-Event-ID: an EventSource sends it when it reconnects to the change stream (CONTRACT 13).
export const CORS_ALLOWED_HEADERS = ['Authorization', 'Content-Type', 'Idempotency-Key', 'If-None-Match', 'Last-Event-ID', 'X-Request-Id']
// Beyond the CORS-safelisted ones (Cache-Control, Content-Type, …), what a client reads: validators,
// links, where a creation went, when to retry, a replay, its rate budget, and the id to quote in a report.
export const CORS_EXPOSED_HEADERS = ['ETag', 'Link', 'Location', 'Retry-After', 'Idempotent-Replayed',
  'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'X-Request-Id']
export const CORS_MAX_AGE_SECONDS = 600

export default fp<CorsPluginOptions>(async function corsPlugin (app, opts) {
  const listed = opts.origins === '*' ? null : new Set(opts.origins)
  await app.register(cors, {
    // A function, never the list itself: given a list, @fastify/cors still sends the other
    // Access-Control-* headers to an unlisted origin and answers its preflight 204. Resolving
    // false sends none, and a preflight then falls through to the not-found handler (404).
    // A request without Origin is not a cross-origin one: nothing is added but Vary: Origin.
    origin: (origin, callback) => {
      if (origin === undefined) callback(null, false)
      else if (listed === null) callback(null, '*')
      else callback(null, listed.has(origin) && origin)
    },
    methods: CORS_METHODS,
    allowedHeaders: CORS_ALLOWED_HEADERS,
    exposedHeaders: CORS_EXPOSED_HEADERS,
    maxAge: CORS_MAX_AGE_SECONDS,
    // Bearer tokens only, no cookies: a credentialed request is never needed, and '*' stays usable.
    credentials: false,
    // Any OPTIONS from an allowed origin is answered as a preflight; the service has no OPTIONS
    // routes of its own, and the strict mode's 400 would be a text/plain body.
    strictPreflight: false
  })
  // Helmet's Cross-Origin-Resource-Policy: same-origin is relaxed only for an origin CORS admits.
  app.addHook('onSend', function (request, reply, payload, done) {
    const policy = resourcePolicyFor(reply.getHeader('access-control-allow-origin'))
    if (policy !== undefined) reply.header('cross-origin-resource-policy', policy)
    done(null, payload)
  })
}, { name: 'cors', fastify: '5.x', dependencies: ['security'] })
