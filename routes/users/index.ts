import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { hasRoleAtLeast } from '../../src/auth/roles.js'
import { ForbiddenError, NotFoundError } from '../../src/errors.js'
import { pageLinks } from '../../src/lib/links.js'
import { pageSchema, readPage } from '../../src/lib/pagination.js'
import { USER_SORT_FIELDS } from '../../src/repositories/users.js'
import { bearerAuth, ErrorRef, IdParams, Ref } from '../../src/schemas/common.js'
import { UserListQuery, UserSchema } from '../../src/schemas/users.js'

const users: FastifyPluginAsyncTypebox = async function (app) {
  const { usersRepository } = app
  const UserRef = Ref(UserSchema)

  // Every route of this router needs a caller.
  app.addHook('onRequest', app.authenticate)

  app.get('/me', {
    schema: {
      tags: ['users'],
      summary: "The caller's local user record (created on first call)",
      security: bearerAuth,
      response: { 200: UserRef, 401: ErrorRef, 502: ErrorRef }
    }
  }, async function (request) {
    return app.resolveLocalUser(request)
  })

  app.get('/', {
    preValidation: app.requireRoleAtLeast('Admin'),
    schema: {
      tags: ['users'],
      summary: 'List local users (Admin or higher)',
      security: bearerAuth,
      querystring: UserListQuery,
      response: { 200: pageSchema(UserRef), 400: ErrorRef, 401: ErrorRef, 403: ErrorRef, 500: ErrorRef }
    }
  }, async function (request, reply) {
    const query = request.query
    const page = await readPage('users', query, USER_SORT_FIELDS, (page) => usersRepository.list(query, page))
    reply.header('link', pageLinks(request.url, page))
    return page
  })

  app.get('/:id', {
    schema: {
      tags: ['users'],
      summary: 'One local user (the caller, or anyone for Admin or higher)',
      security: bearerAuth,
      params: IdParams,
      response: { 200: UserRef, 400: ErrorRef, 401: ErrorRef, 403: ErrorRef, 404: ErrorRef, 502: ErrorRef }
    }
  }, async function (request) {
    const { id } = request.params
    const me = await app.resolveLocalUser(request)
    if (me.id === id) return me
    // CONTRACT 10: below Admin, another id is 403 whether or not it exists.
    if (!hasRoleAtLeast(request.user!.role, 'Admin')) throw new ForbiddenError()
    const user = await usersRepository.findById(id)
    if (user === null) throw new NotFoundError('User')
    return user
  })
}

export default users
