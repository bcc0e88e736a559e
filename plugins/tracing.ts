// tracing: OpenTelemetry traces (CONTRACT 15), registered first and only when OTEL_* asks for them.
import fp from 'fastify-plugin'
import { startTracing } from '../src/tracing/sdk.js'
import { followRequest, noteFailure, settleServerStatus } from '../src/tracing/server-spans.js'
import type { TracingConfig } from '../src/tracing/settings.js'

export default fp<TracingConfig>(async function tracing (app, opts) {
  const sdk = startTracing(opts, app.log.child({ component: 'tracing' }))
  app.addHook('onClose', async () => { await sdk.shutdown() })
  // Before every other plugin and route: @fastify/otel wraps routes as they are added, and its
  // onRequest hook, which starts the span, must come before any hook that waits on something.
  await app.register(sdk.fastifyPlugin)
  app.addHook('onRequest', function (request, reply, done) {
    followRequest(request, reply)
    done()
  })
  app.addHook('onError', function (request, _reply, _error, done) {
    noteFailure(request)
    done()
  })
  app.addHook('onSend', function (request, reply, payload, done) {
    settleServerStatus(request, reply)
    done(null, payload)
  })
}, { name: 'tracing', fastify: '5.x' })
