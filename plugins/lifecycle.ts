// lifecycle: the draining state of CONTRACT 11. Once a shutdown starts, every response says
// `Connection: close` and idle keep-alive connections are closed as they become idle, so a
// keep-alive client cannot hold the server open past its last in-flight request.
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyInstance {
    /** Starts draining: readiness fails, responses close their connections, idle ones are closed. */
    drain: () => void
    isDraining: () => boolean
  }
}

// How often connections that became idle since the last sweep are closed while draining.
const IDLE_SWEEP_MS = 50

export default fp(async function lifecycle (app) {
  let draining = false
  let sweep: NodeJS.Timeout | undefined

  app.decorate('isDraining', () => draining)
  app.decorate('drain', () => {
    if (draining) return
    draining = true
    app.server.closeIdleConnections()
    sweep = setInterval(() => { app.server.closeIdleConnections() }, IDLE_SWEEP_MS)
    sweep.unref()
  })

  // Synchronous and a single boolean test on the hot path.
  app.addHook('onSend', function (request, reply, payload, done) {
    if (draining) reply.header('connection', 'close')
    done(null, payload)
  })
  app.addHook('onClose', function (instance, done) {
    if (sweep !== undefined) clearInterval(sweep)
    done()
  })
}, { name: 'lifecycle', fastify: '5.x' })
