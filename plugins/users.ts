// users: the local users repository (SPEC 5.5): provisioning on first use, the collection, single users;
// and resolveLocalUser, the caller's local user provisioned from the caller auth makes.
import type { FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { LocalUser } from '../src/schemas/users.js'
import { createUsersRepository, type UsersRepository } from '../src/users/repository.js'

declare module 'fastify' {
  interface FastifyInstance {
    usersRepository: UsersRepository
    /** The caller's local user record, provisioned from userinfo on first sight (SPEC 5.5). */
    resolveLocalUser: (request: FastifyRequest) => Promise<LocalUser>
  }
}

export default fp(async function users (app) {
  const repository = createUsersRepository(app.db, app.readDb)
  app.decorate('usersRepository', repository)
  app.decorate('resolveLocalUser', async function resolveLocalUser (request: FastifyRequest) {
    return await repository.localUser(app.callerOf(request))
  })
}, { name: 'users', fastify: '5.x', dependencies: ['db', 'auth'] })
