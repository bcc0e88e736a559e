import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { DatabaseUnavailableError } from '../src/errors.js'
import { ErrorRef, HealthSchema } from '../src/schemas/common.js'

const health: FastifyPluginAsyncTypebox = async function (app) {
  const { pingDatabase } = app

  app.get('/health', {
    schema: {
      tags: ['health'],
      summary: 'Liveness: the process is up',
      description: 'Never touches the database; `/health/ready` is the readiness check.',
      response: { 200: HealthSchema }
    }
  }, async function () {
    return { ok: true as const }
  })

  app.get('/health/ready', {
    schema: {
      tags: ['health'],
      summary: 'Readiness: the database answers',
      description: '503 `Database unavailable` while the database does not answer.',
      response: { 200: HealthSchema, 503: ErrorRef }
    }
  }, async function (request) {
    try {
      await pingDatabase()
    } catch (err) {
      request.log.warn({ err }, 'readiness check failed')
      throw new DatabaseUnavailableError()
    }
    return { ok: true as const }
  })
}

export default health
