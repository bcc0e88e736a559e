// security: the HTTP security headers (helmet) of every response, errors and Swagger UI included; a 304 refreshes a stored 200 and keeps its.
import fp from 'fastify-plugin'
import { securityHeaders } from '../src/lib/security-headers.js'

export default fp(async function security (app) {
  const headers = securityHeaders()
  app.addHook('onRequest', function (request, reply, done) {
    reply.headers(headers)
    done()
  })
}, { name: 'security', fastify: '5.x' })
