import { timingSafeEqual } from 'node:crypto'
import type { FastifyPluginAsync } from 'fastify'
import { UnauthorizedError } from '../src/errors.js'

export interface MetricsRoutesOptions {
  /** METRICS_TOKEN: the bearer token a scrape must present; undefined leaves /metrics open. */
  token: string | undefined
}

/** The header carries exactly `Bearer <token>`, compared in constant time. */
function sameToken (given: string | undefined, expected: string): boolean {
  if (given === undefined) return false
  const a = Buffer.from(given)
  const b = Buffer.from(`Bearer ${expected}`)
  return a.length === b.length && timingSafeEqual(a, b)
}

// GET /metrics (CONTRACT 11): the Prometheus text of plugins/metrics.ts. Not in the OpenAPI document,
// never rate limited (a scraper must not be refused under load).
const metrics: FastifyPluginAsync<MetricsRoutesOptions> = async function (app, opts) {
  app.get('/metrics', {
    schema: { hide: true },
    config: { rateLimit: false }
  }, async function (request, reply) {
    if (opts.token !== undefined && !sameToken(request.headers.authorization, opts.token)) {
      reply.header('www-authenticate', 'Bearer realm="metrics"')
      throw new UnauthorizedError()
    }
    const { contentType, text } = await app.metricsText()
    reply.type(contentType)
    return text
  })
}

export default metrics
