import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { askerOf } from '../../src/http/asker.js'
import { callerScope } from '../../src/http-cache/representation.js'
import { expensiveReadUnavailable } from '../../src/openapi/document.js'
import { bearerAuth, ErrorRef, IdParams, NotModified, Ref } from '../../src/schemas/common.js'
import { UserListQuery, UserPageSchema, UserSchema } from '../../src/schemas/users.js'

const users: FastifyPluginAsyncTypebox = async function (app) {
  const { usersRepository } = app
  const UserRef = Ref(UserSchema)

  // Every route of this router needs a caller.
  app.addHook('onRequest', app.authenticate)

  // The caller's own reads (CONTRACT 12): private, tagged per caller where the body depends on it.
  app.get('/me', {
    config: { representation: { cacheControl: 'private, no-cache', scope: callerScope } },
    schema: {
      tags: ['users'],
      operationId: 'getCurrentUser',
      summary: "The caller's local user record (created on first call)",
      description: 'The first authenticated request of a subject creates its local record from the token and the identity provider\'s userinfo (502 when that fails).',
      security: bearerAuth,
      response: { 200: UserRef, 304: NotModified, 401: ErrorRef, 502: ErrorRef }
    }
  }, async function (request, reply) {
    return reply.represent(await usersRepository.me(app.callerOf(request), request.conditional()))
  })

  app.get('/', {
    preValidation: app.requireRoleAtLeast('Admin'),
    config: { representation: { cacheControl: 'private, no-cache', links: true } },
    schema: {
      tags: ['users'],
      operationId: 'listUsers',
      summary: 'List local users (Admin or higher)',
      description: 'Paginated, filtered by role, sorted like every collection. Below Admin: 403.',
      security: bearerAuth,
      querystring: UserListQuery,
      response: { 200: Ref(UserPageSchema), 304: NotModified, 400: ErrorRef, 401: ErrorRef, 403: ErrorRef, 500: ErrorRef, 503: expensiveReadUnavailable(ErrorRef) }
    }
  }, async function (request, reply) {
    // Who asks, for the admission of a deep page the database must walk (CONTRACT 16).
    const asker = askerOf(request)
    return reply.represent(await usersRepository.listPage(request.query, request.conditional(), asker))
  })

  app.get('/:id', {
    config: { representation: { cacheControl: 'private, no-cache', scope: callerScope } },
    schema: {
      tags: ['users'],
      operationId: 'getUser',
      summary: 'One local user (the caller, or anyone for Admin or higher)',
      description: 'Below Admin, any id but the caller\'s own is 403, whether or not it exists.',
      security: bearerAuth,
      params: IdParams,
      response: { 200: UserRef, 304: NotModified, 400: ErrorRef, 401: ErrorRef, 403: ErrorRef, 404: ErrorRef, 502: ErrorRef }
    }
  }, async function (request, reply) {
    return reply.represent(await usersRepository.visible(app.callerOf(request), request.params.id, request.conditional()))
  })
}

export default users
