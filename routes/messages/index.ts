import { negotiate } from '@fastify/accept-negotiator'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { MissingQueryError } from '../../src/errors.js'
import { askerOf } from '../../src/http/asker.js'
import { sendJson } from '../../src/http-cache/representation.js'
import { expensiveReadUnavailable } from '../../src/openapi/document.js'
import { SYNC_DEFAULT_LIMIT, SYNC_MAX_LIMIT, SYNC_MAX_WAIT } from '../../src/schemas/messages.js'
import { clampInteger, clampLimit } from '../../src/pages/request.js'
import { bearerAuth, ErrorRef, IdParams, NotModified, Ref } from '../../src/schemas/common.js'
import {
  changesResponse, CreateMessageBody, createdMessageResponse, IdempotencyKeyHeaders, keyInProgressResponse, keyReusedResponse, liveClientLimitResponse,
  liveFullResponse, MessageChangesQuery, MessageChangesSchema, MessageListQuery, MessagePageSchema, MessageSchema, MessageSearchQuery
} from '../../src/schemas/messages.js'

const EVENT_STREAM = ['application/json', 'text/event-stream']

/** `Accept: text/event-stream` (an EventSource sends exactly that); anything else, JSON. */
function wantsEvents (accept: string | undefined): boolean {
  return accept !== undefined && negotiate(accept, EVENT_STREAM) === 'text/event-stream'
}

const messages: FastifyPluginAsyncTypebox = async function (app) {
  const { messagesRepository, changes } = app
  const MessageRef = Ref(MessageSchema)

  // Tagged public reads (CONTRACT 12). Cached pages and messages come back as the same objects: each
  // is serialized once per route and compressed once per encoding (plugins/representation.ts).
  app.get('/', {
    config: { representation: { cacheControl: 'no-cache', links: true } },
    schema: {
      tags: ['messages'],
      operationId: 'listMessages',
      summary: 'List messages (public, paginated, filtered, sorted)',
      description: 'Pages by number (`page`, `limit`) or by cursor (`after`, `before`); filters combine; invalid pagination values fall back to their defaults. ' +
        'Answers carry an ETag: send it in If-None-Match to get 304 while the page is unchanged.',
      querystring: MessageListQuery,
      response: { 200: Ref(MessagePageSchema), 304: NotModified, 400: ErrorRef, 500: ErrorRef, 503: expensiveReadUnavailable(ErrorRef) }
    }
  }, async function (request, reply) {
    // Who asks, for the admission of a deep page the database must walk (CONTRACT 16).
    const asker = askerOf(request)
    return reply.represent(await messagesRepository.listPage(request.query, request.conditional(), asker))
  })

  app.get('/search', {
    config: { representation: { cacheControl: 'no-cache', links: true } },
    schema: {
      tags: ['messages'],
      operationId: 'searchMessages',
      summary: 'Search messages by text in content or subject (public, paginated like the list)',
      description: 'Case-insensitive substring match of `q` in content or subject; a missing or blank `q` is 400.',
      querystring: MessageSearchQuery,
      response: { 200: Ref(MessagePageSchema), 304: NotModified, 400: ErrorRef, 500: ErrorRef, 503: expensiveReadUnavailable(ErrorRef) }
    }
  }, async function (request, reply) {
    const term = request.query.q
    if (term === undefined || term.trim() === '') throw new MissingQueryError('q')
    // Who asks, for the admission of the term's read (CONTRACT 16).
    const asker = askerOf(request)
    return reply.represent(await messagesRepository.searchPage(term, request.query, request.conditional(), asker))
  })

  // CONTRACT 12 and 13, delta sync: what changed since the client's token, whoever wrote it; held
  // until something did (`wait`), or streamed as it happens (Accept: text/event-stream).
  app.get('/changes', {
    schema: {
      tags: ['messages'],
      operationId: 'getMessageChanges',
      summary: 'Changes since a sync token (public): a copy of every message first, then creations, changes and deletions; long-poll or stream',
      description: 'Call without `since` to start: every message comes as an `upsert`, in id order, over as many calls as it takes. ' +
        'Apply each answer (upsert and delete by id) and call again with `next` while `hasMore` is true; when it is false, ' +
        'keep `next` and call again with it, with `wait` to be answered as soon as something changes. On 410, drop the copy and start again without `since`. ' +
        'With `Accept: text/event-stream` the same answers come as Server-Sent Events on one open response, starting at `Last-Event-ID`, else `since`, ' +
        'else the copy; a malformed or expired token is answered 400 or 410 as JSON before the stream starts.',
      querystring: MessageChangesQuery,
      response: {
        200: changesResponse(Ref(MessageChangesSchema)),
        400: ErrorRef,
        410: ErrorRef,
        429: liveClientLimitResponse(ErrorRef),
        500: ErrorRef,
        503: liveFullResponse(ErrorRef)
      }
    }
  }, async function (request, reply) {
    const { since, limit, wait } = request.query
    const asked = { since, limit: clampLimit(limit, SYNC_DEFAULT_LIMIT, SYNC_MAX_LIMIT), wait: clampInteger(wait, 0, 0, SYNC_MAX_WAIT), address: request.ip }
    // A HEAD has no body to stream: it is answered as the poll it would be.
    if (request.method === 'GET' && wantsEvents(request.headers.accept)) {
      // A reconnecting EventSource resumes from the last event it received.
      const lastEventId = request.headers['last-event-id']
      await changes.stream(reply, typeof lastEventId === 'string' && lastEventId !== '' ? { ...asked, since: lastEventId } : asked)
      return reply
    }
    return sendJson(reply.header('cache-control', 'no-store'), await changes.poll(reply, asked))
  })

  app.get('/:id', {
    config: { representation: { cacheControl: 'no-cache' } },
    schema: {
      tags: ['messages'],
      operationId: 'getMessage',
      summary: 'Get one message',
      description: 'The message with its author. Answers carry an ETag for conditional requests (If-None-Match: 304).',
      params: IdParams,
      response: { 200: MessageRef, 304: NotModified, 400: ErrorRef, 404: ErrorRef, 500: ErrorRef }
    }
  }, async function (request, reply) {
    return reply.represent(await messagesRepository.getOne(request.params.id, request.conditional()))
  })

  app.post('/', {
    onRequest: app.authenticate,
    schema: {
      tags: ['messages'],
      operationId: 'createMessage',
      summary: 'Create a message as the caller',
      description: 'With an `Idempotency-Key`, a retry of the same request is answered with the first 201, byte for byte, ' +
        'and creates nothing (see the header parameter).',
      security: bearerAuth,
      headers: IdempotencyKeyHeaders,
      body: Ref(CreateMessageBody),
      response: {
        201: createdMessageResponse(MessageRef),
        400: ErrorRef,
        401: ErrorRef,
        409: keyInProgressResponse(ErrorRef),
        422: keyReusedResponse(ErrorRef),
        502: ErrorRef
      }
    }
  }, async function (request, reply) {
    // CONTRACT 12: with an Idempotency-Key, a retried create is answered with the first 201.
    const created = await messagesRepository.create(app.callerOf(request), request.body, request.headers['idempotency-key'])
    if (created.replayed) reply.header('idempotent-replayed', 'true')
    reply.code(created.status).header('location', created.location)
    return typeof created.body === 'string' ? sendJson(reply, created.body) : created.body
  })

  app.delete('/:id', {
    onRequest: app.authenticate,
    schema: {
      tags: ['messages'],
      operationId: 'deleteMessage',
      summary: 'Delete a message (its author, or Moderator or higher)',
      description: 'Only the author may delete, or a caller ranked Moderator or higher; anyone else gets 403.',
      security: bearerAuth,
      params: IdParams,
      response: { 204: Type.Null({ description: 'Deleted' }), 400: ErrorRef, 401: ErrorRef, 403: ErrorRef, 404: ErrorRef, 502: ErrorRef }
    }
  }, async function (request, reply) {
    await messagesRepository.deleteAs(request.params.id, app.callerOf(request))
    return reply.code(204).send(null)
  })
}

export default messages
