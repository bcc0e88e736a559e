// security: the HTTP security headers (helmet) of every response, errors and Swagger UI included; a 304 refreshes a stored 200 and keeps its.
import fp from 'fastify-plugin'
import { helmetOptions, securityHeaders } from '../src/lib/security-headers.js'

export interface SecurityPluginOptions {
  /** Origins the pages may call besides their own (connect-src). */
  connectSources?: readonly string[]
}

export default fp<SecurityPluginOptions>(async function security (app, opts) {
  const headers = securityHeaders(helmetOptions(opts.connectSources))
  app.addHook('onRequest', function (request, reply, done) {
    reply.headers(headers)
    done()
  })
}, { name: 'security', fastify: '5.x' })
