// rate-limit: requests per minute per caller (CONTRACT 2), shared through Redis when several instances run.
import rateLimit from '@fastify/rate-limit'
import fp from 'fastify-plugin'
import { Redis } from 'ioredis'
import { TooManyRequestsError } from '../src/errors.js'

export interface RateLimitPluginOptions {
  /** Requests per minute per caller; 0 turns limiting off. */
  max: number
  redisUrl?: string
}

export default fp<RateLimitPluginOptions>(async function rateLimitPlugin (app, opts) {
  if (opts.max === 0) return
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
    // After authentication, so a caller is counted by subject rather than by shared address.
    hook: 'preHandler',
    keyGenerator: (request) => request.user === null ? `ip:${request.ip}` : `sub:${request.user.sub}`,
    redis,
    nameSpace: 'messages-api-rl-',
    skipOnError: true,
    errorResponseBuilder: () => new TooManyRequestsError()
  })
}, { name: 'rate-limit', fastify: '5.x', dependencies: ['auth'] })
