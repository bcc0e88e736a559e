// changes: the change feed of GET /v2/messages/changes (CONTRACT 12, 13): its answers, held
// long-polls and streams behind one watcher per instance, and the pruning of its log.
import type { FastifyReply } from 'fastify'
import fp from 'fastify-plugin'
import { createChangeFeed } from '../src/changes/feed.js'
import { delivered } from '../src/changes/live/delay-metric.js'
import { createLiveDelivery, type LiveConnection, type LiveDelivery, type LiveOptions, type LiveRequest } from '../src/changes/live/delivery.js'
import type { AppConfig } from '../src/config.js'
import { every } from '../src/db/upkeep.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The change feed: a poll's answer (held while `wait` allows), a stream, and what they hold. */
    changes: {
      /** A poll's answer, held while `wait` allows and nothing can be answered yet. */
      poll: (reply: FastifyReply, request: LiveRequest) => Promise<Buffer>
      /** Opens a stream on the reply, which it takes over from Fastify once the stream can start. */
      stream: (reply: FastifyReply, request: LiveRequest) => Promise<void>
      stats: LiveDelivery['stats']
      prune: () => Promise<number>
    }
  }
}

const PRUNE_EVERY_MS = 60_000

export interface ChangesPluginOptions extends LiveOptions {
  /** SYNC_RETENTION_HOURS: how long the log keeps a change, and a token stays valid (default 720). */
  retentionHours?: number
}

/** The plugin's options as the configuration sets them (src/config.ts). */
export function changesOptions (config: AppConfig): ChangesPluginOptions {
  return {
    retentionHours: config.syncRetentionHours,
    maxConnections: config.liveMaxConnections,
    maxPerClient: config.liveMaxPerClient,
    maxBufferBytes: config.liveMaxBufferBytes,
    heartbeatS: config.liveHeartbeatS,
    stallS: config.liveStallS,
    watchMs: config.liveWatchMs,
    shutdownGraceMs: config.shutdownGraceMs
  }
}

/** The reply as live delivery takes it: its response, and Fastify's hand-over of it. */
function connectionOf (reply: FastifyReply): LiveConnection {
  return {
    response: reply.raw,
    takeOver: () => {
      reply.hijack()
      return reply.getHeaders()
    }
  }
}

// Writes that succeed on this instance wake the watcher at once instead of at its next interval.
const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

export default fp<ChangesPluginOptions>(async function changes (app, opts) {
  const feed = createChangeFeed(app.db, app.readDb, { retentionHours: opts.retentionHours ?? 720, history: app.databaseHistory })
  // Older entries, and the tokens that need them, expire. Primary only.
  const stopPruning = every(PRUNE_EVERY_MS, feed.prune, app.log, 'change log pruning failed')
  app.addHook('onClose', async () => { stopPruning() })

  const live = createLiveDelivery(feed, opts, {
    failures: {
      failed: (read, err) => { app.log.warn({ read, err: { message: err instanceof Error ? err.message : String(err) } }, 'live delivery: reading the change feed failed; trying again, with growing delays') },
      recovered: (read, failures) => { app.log.info({ read, failures }, 'live delivery: reading the change feed works again') }
    },
    delivered
  })
  app.decorate('changes', {
    poll: (reply, request) => live.poll(reply.raw, request),
    stream: (reply, request) => live.stream(connectionOf(reply), request),
    stats: live.stats,
    prune: feed.prune
  })

  app.addHook('onResponse', function (request, reply, done) {
    if (reply.statusCode < 300 && WRITES.has(request.method)) live.poke()
    done()
  })
  // Before the server stops accepting: held long-polls are answered and streams end, so close() does
  // not wait out a `wait`, and clients move to another instance without a gap.
  app.addHook('preClose', function (done) {
    live.close()
    done()
  })
}, { name: 'changes', fastify: '5.x', dependencies: ['db'] })
