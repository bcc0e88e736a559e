// security: the HTTP security headers (helmet) of every response, errors and Swagger UI included.
import helmet from '@fastify/helmet'
import fp from 'fastify-plugin'

// One policy for the whole service. The JSON routes need nothing, and Swagger UI (/api-docs) loads
// only same-origin scripts and styles, its icons as data: URIs, and calls the API on the same origin.
// No 'unsafe-inline' and no upgrade-insecure-requests: the service itself speaks plain HTTP (TLS, if
// any, ends in front of it), and upgrading would break the docs page on http://localhost.
export const CONTENT_SECURITY_POLICY = {
  'default-src': ["'self'"],
  'base-uri': ["'self'"],
  'connect-src': ["'self'"],
  'font-src': ["'self'", 'data:'],
  'form-action': ["'self'"],
  'frame-ancestors': ["'none'"],
  'img-src': ["'self'", 'data:'],
  'object-src': ["'none'"],
  'script-src': ["'self'"],
  'script-src-attr': ["'none'"],
  'style-src': ["'self'"]
}

export default fp(async function security (app) {
  await app.register(helmet, {
    global: true,
    contentSecurityPolicy: { useDefaults: false, directives: CONTENT_SECURITY_POLICY },
    xFrameOptions: { action: 'deny' }
  })
}, { name: 'security', fastify: '5.x' })
