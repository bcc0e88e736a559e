// users: the local users repository (SPEC 5.5): provisioning on first use from the identity provider's
// userinfo, the collection, single users; and resolveLocalUser, the local user of the caller auth yields.
import type { FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { createUserinfoClient } from '../src/auth/userinfo.js'
import { stripTrailingSlash } from '../src/config.js'
import type { LocalUser } from '../src/schemas/users.js'
import { createUsersRepository, type UsersRepository } from '../src/users/repository.js'

declare module 'fastify' {
  interface FastifyInstance {
    usersRepository: UsersRepository
    /** The caller's local user record, provisioned from userinfo on first sight (SPEC 5.5). */
    resolveLocalUser: (request: FastifyRequest) => Promise<LocalUser>
  }
}

export interface UsersPluginOptions {
  /** AUTH_ISSUER: userinfo is fetched from it, with the caller's own token (CONTRACT 4). */
  issuer: string
  upstreamTimeoutMs?: number
}

export default fp<UsersPluginOptions>(async function users (app, opts) {
  const userinfo = createUserinfoClient({ issuer: stripTrailingSlash(opts.issuer), timeoutMs: opts.upstreamTimeoutMs })
  app.addHook('onClose', async () => { await userinfo.close() })
  const repository = createUsersRepository(app.db, app.readDb, { fetchUserinfo: userinfo.fetch })
  app.decorate('usersRepository', repository)
  app.decorate('resolveLocalUser', async function resolveLocalUser (request: FastifyRequest) {
    return await repository.localUser(app.callerOf(request))
  })
}, { name: 'users', fastify: '5.x', dependencies: ['db', 'auth'] })
