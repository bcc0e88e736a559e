import { ROLE_VALUES } from '../db/schema.js'

export type Role = typeof ROLE_VALUES[number]

/** SPEC 2.4, lowest to highest. The only place the order is written down. */
export const ROLES: readonly Role[] = ROLE_VALUES

export const DEFAULT_ROLE: Role = 'User'

export function isRole (value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value)
}

/** Rank in the hierarchy; -1 for a string that is not a known role. */
export function roleRank (role: string): number {
  return (ROLES as readonly string[]).indexOf(role)
}

/** SPEC 5.3. An unknown role ranks below everything, so it fails every gate. */
export function hasRoleAtLeast (role: string, minRole: Role): boolean {
  const rank = roleRank(role)
  return rank >= 0 && rank >= roleRank(minRole)
}
