import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { bearerAuth, ErrorRef, Ref } from '../../src/schemas/common.js'
import { HelloSchema } from '../../src/schemas/hello.js'

const hello: FastifyPluginAsyncTypebox = async function (app) {
  app.get('/', {
    onRequest: app.authenticate,
    preValidation: app.requireRoleAtLeast('Admin'),
    schema: {
      tags: ['hello'],
      operationId: 'getHello',
      summary: 'Greet the caller (Admin or higher)',
      description: 'Answers the caller\'s email (from the token, else the local user record) and role. Below Admin: 403.',
      security: bearerAuth,
      response: { 200: Ref(HelloSchema), 401: ErrorRef, 403: ErrorRef, 502: ErrorRef }
    }
  }, async function (request) {
    const user = request.user!
    // CONTRACT 6: the token's email, else the local user's.
    const email = user.email ?? (await app.resolveLocalUser(request)).email ?? ''
    return { message: `Hello, ${email}!`, role: user.role }
  })
}

export default hello
