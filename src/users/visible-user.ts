import { hasRoleAtLeast } from '../auth/roles.js'
import { ForbiddenError } from '../errors.js'
import type { LocalUser } from '../schemas/users.js'

/**
 * The user `id` as a caller may see it: `me` (the caller's own local user), or anyone for a `role`
 * of Admin or higher; null when there is no such user.
 */
export async function visibleUser (users: { findById: (id: number) => Promise<LocalUser | null> }, me: LocalUser, role: string, id: number): Promise<LocalUser | null> {
  if (me.id === id) return me
  // CONTRACT 10: below Admin, another id is 403 whether or not it exists.
  if (!hasRoleAtLeast(role, 'Admin')) throw new ForbiddenError()
  return users.findById(id)
}
