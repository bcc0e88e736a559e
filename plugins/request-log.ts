// request-log: one JSON line per request at info (CONTRACT 11), replacing Fastify's two default
// lines. Built from known fields only, so no header (and no token) can reach it.
import fp from 'fastify-plugin'

export default fp(async function requestLog (app) {
  app.addHook('onResponse', function (request, reply, done) {
    // A shed request's line is load-shedding's summary: under overload a line per request would
    // grow the log as fast as the traffic being refused.
    if (request.shed) {
      done()
      return
    }
    request.log.info({
      method: request.method,
      route: request.routeOptions.url ?? null,
      statusCode: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100,
      sub: request.user?.sub
    }, 'request')
    done()
  })
}, { name: 'request-log', fastify: '5.x', dependencies: ['auth', 'load-shedding'] })
