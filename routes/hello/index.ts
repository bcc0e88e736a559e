import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { bearerAuth, ErrorRef } from '../../src/schemas/common.js'

const HelloSchema = Type.Object({
  message: Type.String({ examples: ['Hello, alice@example.com!'] }),
  role: Type.String({ examples: ['Admin'] })
})

const hello: FastifyPluginAsyncTypebox = async function (app) {
  app.get('/', {
    onRequest: app.authenticate,
    preValidation: app.requireRoleAtLeast('Admin'),
    schema: {
      tags: ['hello'],
      summary: 'Greet the caller (Admin or higher)',
      security: bearerAuth,
      response: { 200: HelloSchema, 401: ErrorRef, 403: ErrorRef, 502: ErrorRef }
    }
  }, async function (request) {
    const user = request.user!
    // CONTRACT 6: the token's email, else the local user's.
    const email = user.email ?? (await app.resolveLocalUser(request)).email ?? ''
    return { message: `Hello, ${email}!`, role: user.role }
  })
}

export default hello
