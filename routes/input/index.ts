import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ErrorRef, IdParams, Ref } from '../../src/schemas/common.js'
import { InputIdSchema, InputUserBody, InputUserSchema } from '../../src/schemas/users.js'

// SPEC 4.7: routes that exist to show the validation rules; they store nothing.
const input: FastifyPluginAsyncTypebox = async function (app) {
  app.post('/users', {
    schema: {
      tags: ['input'],
      operationId: 'validateInputUser',
      summary: 'Validate a user body (name and email, both required strings)',
      description: 'Stores nothing. Every failing field is reported at once in `details`.',
      body: Ref(InputUserBody),
      response: { 201: Ref(InputUserSchema), 400: ErrorRef }
    }
  }, async function (request, reply) {
    const { name, email } = request.body
    return reply.code(201).send({ name, email })
  })

  app.get('/users/:id', {
    schema: {
      tags: ['input'],
      operationId: 'validateInputId',
      summary: 'Validate a path id (a positive integer)',
      description: 'Valid when the id is an integer greater than zero; 0, negative numbers, decimals and non-numbers are 400.',
      params: IdParams,
      response: { 200: Ref(InputIdSchema), 400: ErrorRef }
    }
  }, async function (request) {
    return { id: request.params.id }
  })
}

export default input
