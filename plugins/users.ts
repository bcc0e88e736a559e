// users: the local users repository (SPEC 5.5): provisioning, the collection, single users.
import fp from 'fastify-plugin'
import { createUsersRepository, type UsersRepository } from '../src/users/repository.js'

declare module 'fastify' {
  interface FastifyInstance {
    usersRepository: UsersRepository
  }
}

export default fp(async function users (app) {
  app.decorate('usersRepository', createUsersRepository(app.db, app.readDb))
}, { name: 'users', fastify: '5.x', dependencies: ['db'] })
