import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { askerOf } from '../../src/http/asker.js'
import { callerScope, createRepresentation } from '../../src/http-cache/representation.js'
import { expensiveReadUnavailable } from '../../src/openapi/document.js'
import { bearerAuth, ErrorRef, IdParams, NotModified, Ref } from '../../src/schemas/common.js'
import { UserListQuery, UserPageSchema, UserSchema } from '../../src/schemas/users.js'

const users: FastifyPluginAsyncTypebox = async function (app) {
  const { usersRepository } = app
  const UserRef = Ref(UserSchema)
  // The caller's own reads (CONTRACT 12): private, tagged per caller where the body depends on it.
  const me = createRepresentation({ cacheControl: 'private, no-cache', scope: callerScope })
  const list = createRepresentation({ cacheControl: 'private, no-cache', links: true })
  const user = createRepresentation({ cacheControl: 'private, no-cache', scope: callerScope })

  // Every route of this router needs a caller.
  app.addHook('onRequest', app.authenticate)

  app.get('/me', {
    schema: {
      tags: ['users'],
      operationId: 'getCurrentUser',
      summary: "The caller's local user record (created on first call)",
      description: 'The first authenticated request of a subject creates its local record from the token and the identity provider\'s userinfo (502 when that fails).',
      security: bearerAuth,
      response: { 200: UserRef, 304: NotModified, 401: ErrorRef, 502: ErrorRef }
    }
  }, async function (request, reply) {
    return me.send(request, reply, await usersRepository.me(app.callerOf(request), me.conditional(request)))
  })

  app.get('/', {
    preValidation: app.requireRoleAtLeast('Admin'),
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
    return list.send(request, reply, await usersRepository.listPage(request.query, list.conditional(request), asker))
  })

  app.get('/:id', {
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
    return user.send(request, reply, await usersRepository.visible(app.callerOf(request), request.params.id, user.conditional(request)))
  })
}

export default users
