// live: long-poll and Server-Sent Events on the change feed (CONTRACT 13), one watcher per instance.
import { negotiate } from '@fastify/accept-negotiator'
import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { sendJson } from '../src/http-cache/representation.js'
import { clampInteger, clampLimit } from '../src/pages/request.js'
import { SYNC_DEFAULT_LIMIT, SYNC_MAX_LIMIT, SYNC_MAX_WAIT, type MessageChangesQuery } from '../src/schemas/messages.js'
import { delivered } from '../src/sync/live/deliveries.js'
import { createLiveDelivery, type LiveDelivery, type LiveOptions } from '../src/sync/live/delivery.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Answers GET /v2/messages/changes: a poll, a held long-poll, or a stream of events. */
    serveChanges: (request: ChangesRequest, reply: FastifyReply) => Promise<FastifyReply>
    live: Pick<LiveDelivery, 'stats'>
  }
}

/** What of the request the change feed reads. */
type ChangesRequest = Pick<FastifyRequest, 'headers' | 'ip' | 'method'> & { query: MessageChangesQuery }

const MEDIA = ['application/json', 'text/event-stream']

/** `Accept: text/event-stream` (an EventSource sends exactly that); anything else, JSON. */
function wantsEvents (accept: string | undefined): boolean {
  return accept !== undefined && negotiate(accept, MEDIA) === 'text/event-stream'
}

// Writes that succeed on this instance wake the watcher at once instead of at its next interval.
const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

export default fp<LiveOptions>(async function live (app, opts) {
  const delivery = createLiveDelivery(app.messageChanges, opts, {
    failures: {
      failed: (read, err) => { app.log.warn({ read, err: { message: err instanceof Error ? err.message : String(err) } }, 'live delivery: reading the change feed failed; trying again, with growing delays') },
      recovered: (read, failures) => { app.log.info({ read, failures }, 'live delivery: reading the change feed works again') }
    },
    delivered
  })

  app.decorate('serveChanges', async function serveChanges (request: ChangesRequest, reply: FastifyReply) {
    const { since, limit, wait } = request.query
    const changes = { since, limit: clampLimit(limit, SYNC_DEFAULT_LIMIT, SYNC_MAX_LIMIT), wait: clampInteger(wait, 0, 0, SYNC_MAX_WAIT), address: request.ip }
    // A HEAD has no body to stream: it is answered as the poll it would be.
    if (request.method === 'GET' && wantsEvents(request.headers.accept)) {
      // A reconnecting EventSource resumes from the last event it received.
      const lastEventId = request.headers['last-event-id']
      await delivery.stream(reply, typeof lastEventId === 'string' && lastEventId !== '' ? { ...changes, since: lastEventId } : changes)
      return reply
    }
    return sendJson(reply.header('cache-control', 'no-store'), await delivery.poll(reply, changes))
  })
  app.decorate('live', { stats: delivery.stats })

  app.addHook('onResponse', function (request, reply, done) {
    if (reply.statusCode < 300 && WRITES.has(request.method)) delivery.poke()
    done()
  })
  // Before the server stops accepting: held long-polls are answered and streams end, so close() does
  // not wait out a `wait`, and clients move to another instance without a gap.
  app.addHook('preClose', function (done) {
    delivery.close()
    done()
  })
}, { name: 'live', fastify: '5.x', dependencies: ['db'] })
