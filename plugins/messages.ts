// messages: the messages repository (pages, search, items, writes) with what a create needs wired in
// (the caller's local user, the stored answers of Idempotency-Key), and the merge of the search
// indexes' pending lists, so that no create pays for one.
import fp from 'fastify-plugin'
import { every } from '../src/db/upkeep.js'
import { createMessagesRepository, type MessagesRepository } from '../src/messages/repository.js'
import { mergePendingLists, MERGE_PENDING_LISTS_EVERY_MS } from '../src/search/pending-lists.js'

declare module 'fastify' {
  interface FastifyInstance {
    messagesRepository: MessagesRepository
  }
}

export interface MessagesPluginOptions {
  /** IDEMPOTENCY_TTL_HOURS: how long a stored 201 written with a message is kept (default 24). */
  idempotencyTtlHours?: number
}

export default fp<MessagesPluginOptions>(async function messages (app, opts) {
  app.decorate('messagesRepository', createMessagesRepository(app.db, app.readDb, {
    localUser: app.usersRepository.localUser,
    idempotency: app.idempotencyRepository,
    idempotencyTtlHours: opts.idempotencyTtlHours
  }))
  const stop = every(MERGE_PENDING_LISTS_EVERY_MS, async () => mergePendingLists(app.db), app.log, 'search index pending-list merge failed')
  app.addHook('onClose', async () => { stop() })
}, { name: 'messages', fastify: '5.x', dependencies: ['db', 'users', 'idempotency'] })
