import { DEFAULT_ROLE, isRole } from '../auth/roles.js'
import type { FetchUserinfo, UserinfoProfile } from '../auth/userinfo.js'
import { IdentityProviderError } from '../errors.js'
import type { LocalUser } from '../schemas/users.js'
import { inStepSpan } from '../tracing/steps.js'

const SETTLED_GRACE_MS = 2000

/**
 * A name or e-mail from userinfo as PostgreSQL can store it: NUL and lone surrogates become U+FFFD
 * (which the driver's UTF-8 encoding already made of a lone surrogate). It is the identity provider's
 * data about the person, who cannot correct it here: one odd character must neither fail every
 * request of theirs (a 500, or a 502 for ever) nor be stored as a text the service did not choose.
 */
const storable = (value: string | null): string | null => value === null ? null : value.toWellFormed().replaceAll('\u0000', '\ufffd')

/** Who asks, as the users capability sees a caller: the verified token's claims, and the token itself. */
export interface Caller {
  sub: string
  role: string
  email?: string | undefined
  name?: string | undefined
  /**
   * The caller's own bearer token, for the identity provider's userinfo (CONTRACT 4); absent under the
   * test stub (SPEC 5.7), whose claims are the whole profile.
   */
  token?: string | undefined
}

/** The profile of a caller without a token: its claims. */
const claimedProfile = (caller: Caller): UserinfoProfile => ({ sub: caller.sub, email: caller.email ?? null, name: caller.name ?? null, role: caller.role })

/** A local user's row as provisioning writes it. */
export interface UserProfile {
  subjectId: string
  email: string | null
  name: string | null
  role: string
}

/** What provisioning reads and writes. */
export interface LocalUserStore {
  findBySubject: (subjectId: string) => Promise<LocalUser | null>
  upsert: (profile: UserProfile) => Promise<LocalUser>
}

/**
 * SPEC 5.5: the local user of a subject. Fast path: the row already exists. Slow path: the profile
 * from the identity provider, upserted. Concurrent first requests of one subject share one promise,
 * so they make one userinfo call and create one row.
 */
export function createLocalUserResolver (usersRepository: LocalUserStore, fetchUserinfo?: FetchUserinfo) {
  const inFlight = new Map<string, Promise<LocalUser>>()

  // A span of the request that provisions (CONTRACT 15): userinfo and the upsert under it. The user
  // appears by local id only, never by subject, e-mail or name.
  async function provision (caller: Caller): Promise<LocalUser> {
    const { sub, token } = caller
    return await inStepSpan('provision local user', async (span) => {
      const profile = token === undefined || fetchUserinfo === undefined ? claimedProfile(caller) : await fetchUserinfo(token)
      // CONTRACT 10: a userinfo answer about someone else is a failure, and nothing is written.
      if (profile.sub !== sub) throw new IdentityProviderError()
      const user = await usersRepository.upsert({
        subjectId: sub,
        email: storable(profile.email),
        name: storable(profile.name),
        role: isRole(profile.role) ? profile.role : DEFAULT_ROLE
      })
      span?.setAttribute('user.id', user.id)
      return user
    })
  }

  return async function resolveLocalUser (caller: Caller): Promise<LocalUser> {
    const { sub } = caller
    const existing = await usersRepository.findBySubject(sub)
    if (existing !== null) return existing
    let pending = inFlight.get(sub)
    if (pending === undefined) {
      pending = provision(caller)
      inFlight.set(sub, pending)
      // Kept a moment after it settles: a lookup that started before the row was written and
      // found nothing then joins this result instead of calling userinfo a second time.
      const forget = () => { setTimeout(() => inFlight.delete(sub), SETTLED_GRACE_MS).unref() }
      pending.then(forget, () => inFlight.delete(sub))
    }
    return pending
  }
}

export type LocalUserResolver = ReturnType<typeof createLocalUserResolver>
