import { DEFAULT_ROLE, isRole } from '../auth/roles.js'
import type { UserinfoProfile } from '../auth/userinfo.js'
import { IdentityProviderError } from '../errors.js'
import type { LocalUser } from '../schemas/users.js'
import { inStepSpan } from '../tracing/steps.js'

const SETTLED_GRACE_MS = 2000

export type LoadProfile = () => Promise<UserinfoProfile>

/**
 * A name or e-mail from userinfo as PostgreSQL can store it: NUL and lone surrogates become U+FFFD
 * (which the driver's UTF-8 encoding already made of a lone surrogate). It is the identity provider's
 * data about the person, who cannot correct it here: one odd character must neither fail every
 * request of theirs (a 500, or a 502 for ever) nor be stored as a text the service did not choose.
 */
const storable = (value: string | null): string | null => value === null ? null : value.toWellFormed().replaceAll('\u0000', '\ufffd')

/** Who asks, as the users capability sees a caller: the token's subject and role, and how to load their profile. */
export interface Caller {
  sub: string
  role: string
  /** The identity provider's userinfo for the caller's own token (CONTRACT 4). */
  profile: LoadProfile
}

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
export function createLocalUserResolver (usersRepository: LocalUserStore) {
  const inFlight = new Map<string, Promise<LocalUser>>()

  // A span of the request that provisions (CONTRACT 15): userinfo and the upsert under it. The user
  // appears by local id only, never by subject, e-mail or name.
  async function provision (sub: string, loadProfile: LoadProfile): Promise<LocalUser> {
    return await inStepSpan('provision local user', async (span) => {
      const profile = await loadProfile()
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

  return async function resolveLocalUser ({ sub, profile: loadProfile }: Caller): Promise<LocalUser> {
    const existing = await usersRepository.findBySubject(sub)
    if (existing !== null) return existing
    let pending = inFlight.get(sub)
    if (pending === undefined) {
      pending = provision(sub, loadProfile)
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
