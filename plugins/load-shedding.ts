// load-shedding: past MAX_EVENT_LOOP_DELAY_MS the service answers 503 at once instead of letting
// every queued request time out (CONTRACT 11). The probes are exempt.
import underPressure from '@fastify/under-pressure'
import fp from 'fastify-plugin'
import { LoadShedError } from '../src/errors.js'
import { createShedCounter } from '../src/load-shedding/shed-counter.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Answered 503 by load shedding: its log line is the summary of src/load-shedding/shed-counter.ts. */
    shed: boolean
  }
}

export interface LoadSheddingOptions {
  /** Event-loop delay limit in ms; 0 turns shedding off. */
  maxEventLoopDelayMs: number
}

// Seconds a shed caller should wait: one sampling interval is enough for the loop to be re-measured.
const RETRY_AFTER_SECONDS = 1
const RETRY_AFTER = String(RETRY_AFTER_SECONDS)
const SAMPLE_INTERVAL_MS = 250
export const PROBES = new Set(['/health', '/health/ready'])

// Samples taken before the service was ready measure start-up work (migrations, compiling the
// routes), not load: pressure counts only once two samples have been taken after ready.
const ARMING_DELAY_MS = 2 * SAMPLE_INTERVAL_MS

export default fp<LoadSheddingOptions>(async function loadShedding (app, opts) {
  // Decorated even when shedding is off, so every request has the same shape and reading it is one test.
  app.decorateRequest('shed', false)
  if (opts.maxEventLoopDelayMs === 0) return
  let armedAt = Infinity
  const counter = createShedCounter(app.log)
  app.addHook('onReady', async () => { armedAt = performance.now() + ARMING_DELAY_MS })
  app.addHook('onClose', async () => { counter.flush() })
  await app.register(underPressure, {
    maxEventLoopDelay: opts.maxEventLoopDelayMs,
    sampleInterval: SAMPLE_INTERVAL_MS,
    retryAfter: RETRY_AFTER_SECONDS,
    exposeStatusRoute: false,
    // Only called under pressure. Resolving lets the request through; a rejection goes to the
    // error handler, which gives the usual shape, {"error":"Service unavailable"}, and logs nothing:
    // the request is marked and counted, and the counter writes one summary line a second.
    pressureHandler: async (request, reply) => {
      if (PROBES.has(request.routeOptions.url ?? '') || performance.now() < armedAt) return
      reply.header('retry-after', RETRY_AFTER)
      request.shed = true
      counter.add()
      throw new LoadShedError()
    }
  })
}, { name: 'load-shedding', fastify: '5.x', dependencies: ['errors'] })
