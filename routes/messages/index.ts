import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { hasRoleAtLeast } from '../../src/auth/roles.js'
import { ForbiddenError, MissingQueryError, NotFoundError } from '../../src/errors.js'
import { pageLinks } from '../../src/lib/links.js'
import { pageSchema, readPage } from '../../src/lib/pagination.js'
import { createSerializedSender } from '../../src/lib/serialized-reply.js'
import { MESSAGE_SORT_FIELDS } from '../../src/repositories/messages.js'
import { bearerAuth, ErrorRef, IdParams, Ref } from '../../src/schemas/common.js'
import { CreateMessageBody, MessageListQuery, MessageSchema, MessageSearchQuery } from '../../src/schemas/messages.js'

const messages: FastifyPluginAsyncTypebox = async function (app) {
  const { messagesRepository } = app
  const MessageRef = Ref(MessageSchema)
  // Cached pages come back as the same objects: each is serialized once per route.
  const sendList = createSerializedSender()
  const sendSearch = createSerializedSender()

  app.get('/', {
    schema: {
      tags: ['messages'],
      summary: 'List messages (public, paginated, filtered, sorted)',
      querystring: MessageListQuery,
      response: { 200: pageSchema(MessageRef), 400: ErrorRef, 500: ErrorRef }
    }
  }, async function (request, reply) {
    const query = request.query
    const page = await readPage('messages', query, MESSAGE_SORT_FIELDS, (page) => messagesRepository.list(query, page))
    reply.header('link', pageLinks(request.url, page))
    return sendList(reply, page)
  })

  app.get('/search', {
    schema: {
      tags: ['messages'],
      summary: 'Search messages by text in content or subject (public, paginated like the list)',
      querystring: MessageSearchQuery,
      response: { 200: pageSchema(MessageRef), 400: ErrorRef, 500: ErrorRef }
    }
  }, async function (request, reply) {
    const query = request.query
    const term = query.q
    if (term === undefined || term.trim() === '') throw new MissingQueryError('q')
    const page = await readPage('messages', query, MESSAGE_SORT_FIELDS, (page) => messagesRepository.search(term, query, page))
    reply.header('link', pageLinks(request.url, page))
    return sendSearch(reply, page)
  })

  app.get('/:id', {
    schema: {
      tags: ['messages'],
      summary: 'Get one message',
      params: IdParams,
      response: { 200: MessageRef, 400: ErrorRef, 404: ErrorRef, 500: ErrorRef }
    }
  }, async function (request) {
    const message = await messagesRepository.findById(request.params.id)
    if (message === null) throw new NotFoundError('Message')
    return message
  })

  app.post('/', {
    onRequest: app.authenticate,
    schema: {
      tags: ['messages'],
      summary: 'Create a message as the caller',
      security: bearerAuth,
      body: CreateMessageBody,
      response: { 201: MessageRef, 400: ErrorRef, 401: ErrorRef, 502: ErrorRef }
    }
  }, async function (request, reply) {
    const { sub } = request.user!
    // The common case is one statement: the author is found by subject while inserting. A subject
    // seen for the first time is provisioned (SPEC 5.5), then inserted.
    let message = await messagesRepository.create(sub, request.body)
    if (message === null) {
      await app.resolveLocalUser(request)
      message = await messagesRepository.create(sub, request.body)
      if (message === null) throw new Error('local user vanished while creating a message')
    }
    return reply.code(201).header('location', `/v2/messages/${message.id}`).send(message)
  })

  app.delete('/:id', {
    onRequest: app.authenticate,
    schema: {
      tags: ['messages'],
      summary: 'Delete a message (its author, or Moderator or higher)',
      security: bearerAuth,
      params: IdParams,
      response: { 204: Type.Null({ description: 'Deleted' }), 400: ErrorRef, 401: ErrorRef, 403: ErrorRef, 404: ErrorRef, 502: ErrorRef }
    }
  }, async function (request, reply) {
    const { id } = request.params
    const message = await messagesRepository.findById(id)
    if (message === null) throw new NotFoundError('Message')
    if (!hasRoleAtLeast(request.user!.role, 'Moderator')) {
      const me = await app.resolveLocalUser(request)
      if (me.id !== message.author.id) throw new ForbiddenError()
    }
    await messagesRepository.delete(id)
    return reply.code(204).send(null)
  })
}

export default messages
