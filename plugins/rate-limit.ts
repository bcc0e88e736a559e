// rate-limit: requests per minute per caller (CONTRACT 2), shared through Redis when several instances run.
import rateLimit from '@fastify/rate-limit'
import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { Redis } from 'ioredis'
import { TooManyRequestsError } from '../src/errors.js'

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Counts a request refused before the limit's own hook (a token that failed verification) against its
     * address, and throws 429 once that address is past the limit: a flood of bad tokens is not free.
     */
    countRefused: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
  }
}

export interface RateLimitPluginOptions {
  /** Requests per minute per caller; 0 turns limiting off. */
  max: number
  redisUrl?: string
}

export default fp<RateLimitPluginOptions>(async function rateLimitPlugin (app, opts) {
  if (opts.max === 0) {
    app.decorate('countRefused', async function countRefused () {})
    return
  }
  let redis: Redis | undefined
  if (opts.redisUrl !== undefined) {
    // Fail fast rather than queue: a slow store must not stall every request.
    redis = new Redis(opts.redisUrl, { connectTimeout: 1000, maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true })
    redis.on('error', (err) => app.log.warn({ err: { message: err.message } }, 'rate-limit store error'))
    app.addHook('onClose', async () => { redis?.disconnect() })
    // Limits are skipped while the store is unreachable (skipOnError); start anyway, but say so.
    await redis.connect().catch((err: Error) => app.log.warn({ err: { message: err.message } }, 'rate-limit store unreachable'))
  }
  await app.register(rateLimit, {
    max: opts.max,
    timeWindow: 60_000,
    // After authentication (route-level onRequest), so a caller is counted by subject rather than by
    // shared address; before the body is parsed and validated, so malformed and invalid requests count too.
    hook: 'preParsing',
    // request.user is set by plugins/auth.ts when the request is handled, after this plugin is registered.
    keyGenerator: (request) => request.user === null ? `ip:${request.ip}` : `sub:${request.user.sub}`,
    redis,
    nameSpace: 'messages-api-rl-',
    skipOnError: true,
    errorResponseBuilder: () => new TooManyRequestsError()
  })
  // The same store and keys: a refused request has no user, so it counts by address, once (the
  // plugin marks a request it has counted).
  const limit = app.rateLimit()
  app.decorate('countRefused', async function countRefused (request: FastifyRequest, reply: FastifyReply) {
    await limit.call(app, request, reply)
  })
}, { name: 'rate-limit', fastify: '5.x' })
