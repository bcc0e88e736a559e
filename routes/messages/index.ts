import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { NotFoundError } from '../../src/errors.js'
import { PaginationSchema, pageSchema, readPage } from '../../src/lib/pagination.js'
import { MESSAGE_SORT_FIELDS } from '../../src/repositories/messages.js'
import { ErrorRef, IdParams, Ref } from '../../src/schemas/common.js'
import { MessageListQuery, MessageSchema } from '../../src/schemas/messages.js'

const messages: FastifyPluginAsyncTypebox = async function (app) {
  const { messagesRepository } = app
  const MessageRef = Ref(MessageSchema)

  app.get('/', {
    schema: {
      tags: ['messages'],
      summary: 'List messages (public, paginated, filtered, sorted)',
      querystring: MessageListQuery,
      response: { 200: pageSchema(MessageRef, Ref(PaginationSchema)), 400: ErrorRef, 500: ErrorRef }
    }
  }, async function (request) {
    const query = request.query
    return readPage('messages', query, MESSAGE_SORT_FIELDS, (page) => messagesRepository.list(query, page))
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
}

export default messages
