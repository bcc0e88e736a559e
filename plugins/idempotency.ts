// idempotency: the stored answers of Idempotency-Key (CONTRACT 12), and their pruning.
import fp from 'fastify-plugin'
import { every } from '../src/db/upkeep.js'
import { createIdempotencyRepository, type IdempotencyRepository } from '../src/idempotency/repository.js'

declare module 'fastify' {
  interface FastifyInstance {
    idempotencyRepository: IdempotencyRepository
  }
}

const PRUNE_EVERY_MS = 60_000

export interface IdempotencyPluginOptions {
  /** IDEMPOTENCY_TTL_HOURS (default 24). */
  ttlHours?: number
}

export default fp<IdempotencyPluginOptions>(async function idempotency (app, opts) {
  const repository = createIdempotencyRepository(app.db, { ttlHours: opts.ttlHours ?? 24 })
  app.decorate('idempotencyRepository', repository)
  // Expired keys already count as absent; deleting them only keeps the table small. Primary only.
  const stop = every(PRUNE_EVERY_MS, repository.prune, app.log, 'idempotency key pruning failed')
  app.addHook('onClose', async () => { stop() })
}, { name: 'idempotency', fastify: '5.x', dependencies: ['db'] })
