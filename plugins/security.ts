// security: the HTTP security headers (helmet) of every response, errors and Swagger UI included; a 304 refreshes a stored 200 and keeps its.
import fp from 'fastify-plugin'
import { helmetOptions, securityHeaders } from '../src/http/security-headers.js'

export interface SecurityPluginOptions {
  /** The development identity provider's origin, when it signs Swagger UI in (helmetOptions). */
  signInOrigin?: string | undefined
}

export default fp<SecurityPluginOptions>(async function security (app, opts) {
  const headers = securityHeaders(helmetOptions(opts.signInOrigin))
  app.addHook('onRequest', function (request, reply, done) {
    reply.headers(headers)
    done()
  })
}, { name: 'security', fastify: '5.x' })
