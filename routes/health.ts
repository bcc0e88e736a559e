import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { DrainingError } from '../src/errors.js'
import { ErrorRef, HealthSchema, Ref } from '../src/schemas/common.js'

const health: FastifyPluginAsyncTypebox = async function (app) {
  const { pingDatabase, isDraining } = app
  // Probes are never rate limited (CONTRACT 11): a load balancer's checks must not fail under traffic.
  const config = { rateLimit: false as const }

  app.get('/health', {
    config,
    // Eleven bytes never reach the compression threshold: the probe skips the hook altogether.
    compress: false,
    schema: {
      tags: ['health'],
      operationId: 'getHealth',
      summary: 'Liveness: the process is up',
      description: 'Never touches the database; `/health/ready` is the readiness check.',
      response: { 200: Ref(HealthSchema) }
    }
  }, async function () {
    return { ok: true as const }
  })

  app.get('/health/ready', {
    config,
    schema: {
      tags: ['health'],
      operationId: 'getReadiness',
      summary: 'Readiness: the database answers',
      description: '503 `Database unavailable` while the database does not answer; 503 `Service unavailable` once shutdown has begun.',
      response: { 200: Ref(HealthSchema), 503: ErrorRef }
    }
  }, async function () {
    // Ready while the database answers, not once shutdown has begun, so a load balancer stops
    // sending traffic (CONTRACT 11); the draining 503 is expected, and logged at debug.
    if (isDraining()) throw new DrainingError()
    await pingDatabase()
    return { ok: true as const }
  })
}

export default health
