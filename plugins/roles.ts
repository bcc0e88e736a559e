// roles: the role gates of SPEC 5.3, as preValidation hooks so a refused caller never sees validation details.
import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { hasRoleAtLeast, type Role } from '../src/auth/roles.js'
import { ForbiddenError, UnauthorizedError } from '../src/errors.js'

type RoleGate = (request: FastifyRequest, reply: FastifyReply) => Promise<void>

declare module 'fastify' {
  interface FastifyInstance {
    /** Passes only when the caller's role is exactly `role`. */
    requireRole: (role: Role) => RoleGate
    /** Passes when the caller's role ranks at or above `minRole`. */
    requireRoleAtLeast: (minRole: Role) => RoleGate
  }
}

function gate (allowed: (role: string) => boolean): RoleGate {
  return async function roleGate (request) {
    // Gates run after authentication; without a user the route was wired wrong, and 401 is the safe answer.
    if (request.user === null) throw new UnauthorizedError()
    if (!allowed(request.user.role)) throw new ForbiddenError()
  }
}

export default fp(async function roles (app) {
  app.decorate('requireRole', (role: Role) => gate((actual) => actual === role))
  app.decorate('requireRoleAtLeast', (minRole: Role) => gate((actual) => hasRoleAtLeast(actual, minRole)))
}, { name: 'roles', fastify: '5.x', dependencies: ['auth'] })
