import { eq, sql } from 'drizzle-orm'
import type { FetchUserinfo } from '../auth/userinfo.js'
import type { Database } from '../db/client.js'
import type { Asker } from '../db/heavy-reads.js'
import { users, type ROLE_VALUES, type UserRow } from '../db/schema.js'
import { primaryOnly, type ReadHandles } from '../db/read-router.js'
import { found, tagFor, type Conditional, type Revalidated } from '../http-cache/entity-tag.js'
import { pageRequest, toPage, type Page } from '../pages/page.js'
import type { PageRequest } from '../pages/request.js'
import { USER_PAGE_BYTES, pageBytes, userBytes } from '../memory/budget.js'
import { VersionedCache, versionReader } from '../http-cache/version-cache.js'
import { createCollectionReader } from '../pages/reader.js'
import { USER_SORT_FIELDS, type LocalUser, type UserListQuery, type UserSort } from '../schemas/users.js'
import { retrieveFailure } from '../errors.js'
import { createLocalUserResolver, type Caller, type UserProfile } from './local-user.js'
import { visibleUser } from './visible-user.js'
import { keyOf, USER_KEYS } from '../db/triggers/counter-keys.js'
import { isoTimestamp, placeholder } from '../pages/spec.js'

export type Role = typeof ROLE_VALUES[number]

export interface UserFilters {
  role?: Role
}

const toUser = (row: UserRow): LocalUser => ({
  id: row.id,
  subjectId: row.subjectId,
  email: row.email,
  name: row.name,
  role: row.role,
  createdAt: row.createdAt.toISOString(),
  updatedAt: row.updatedAt.toISOString()
})

interface UserItemRow { id: number, subject_id: string, email: string | null, name: string | null, role: string, created_at: string, updated_at: string }

const reader = createCollectionReader<UserSort, 'role', UserItemRow>({
  table: 'users',
  from: sql`users m`,
  columns: sql.raw(`m.id::float8 AS id, m.subject_id, m.email, m.name, m.role, ${isoTimestamp('m.created_at')} AS created_at, ${isoTimestamp('m.updated_at')} AS updated_at`),
  sorts: { id: 'm.id', name: 'm.name', email: 'm.email', role: 'm.role', createdAt: 'm.created_at' },
  keys: { id: 'id', name: 'text', email: 'text', role: 'text', createdAt: 'timestamptz' },
  grouped: ['role'],
  filters: { role: { condition: sql`m.role = ${placeholder('role')}::text`, key: keyOf(USER_KEYS.role) } },
  ranked: { dims: { id: 'id', createdAt: 'created' }, filter: 'role' }
})

const fromItemRow = (row: UserItemRow): LocalUser => ({
  id: row.id,
  subjectId: row.subject_id,
  email: row.email,
  name: row.name,
  role: row.role,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})

const pageSize = (page: Page<LocalUser>) => pageBytes(page, userBytes)
const failedRetrieving = retrieveFailure('users')

export interface UsersRepositoryOptions {
  /** The identity provider's userinfo (src/auth/userinfo.ts); without it a caller's claims are its profile. */
  fetchUserinfo?: FetchUserinfo
}

export function createUsersRepository (db: Database, reads: ReadHandles = primaryOnly(db), options: UsersRepositoryOptions = {}) {
  const pages = new VersionedCache<Page<LocalUser>>(['users'], USER_PAGE_BYTES)
  const userVersions = versionReader(['users'])

  async function findById (id: number): Promise<LocalUser | null> {
    const [row] = await db.select().from(users).where(eq(users.id, id))
    return row === undefined ? null : toUser(row)
  }

  async function findBySubject (subjectId: string): Promise<LocalUser | null> {
    const [row] = await db.select().from(users).where(eq(users.subjectId, subjectId))
    return row === undefined ? null : toUser(row)
  }

  /** Creates the row for a subject, or refreshes it if another request created it first. */
  async function upsert (profile: UserProfile): Promise<LocalUser> {
    const [row] = await db.insert(users).values(profile)
      .onConflictDoUpdate({
        target: users.subjectId,
        set: { email: profile.email, name: profile.name, role: profile.role, updatedAt: sql`now()` }
      })
      .returning()
    if (row === undefined) throw new Error('upsert returned no row')
    return toUser(row)
  }

  const localUser = createLocalUserResolver({ findBySubject, upsert }, options.fetchUserinfo)

  /**
   * A single user as the caller sees it, tagged with the users table's version and the caller (CONTRACT 12):
   * nothing else is read, and no one is provisioned, when the client's copy is current. `*` matches a user
   * the caller may see, never a 404.
   */
  async function oneUser (key: string, conditional: Conditional, read: () => Promise<LocalUser | null>): Promise<Revalidated<LocalUser>> {
    const { tag, match } = tagFor(await userVersions(db), key, conditional)
    if (match === 'tag') return { tag, notModified: true }
    const value = await read()
    if (match === 'any' && value !== null) return { tag, notModified: true }
    return found({ tag, notModified: false, value }, 'User')
  }

  async function listOn (target: Database, key: string, query: UserListQuery, page: PageRequest<UserSort>, conditional: Conditional, asker: Asker): Promise<Revalidated<Page<LocalUser>>> {
    const versions = await pages.versions(target)
    const { tag, match } = tagFor(versions, key, conditional)
    if (match !== false) return { tag, notModified: true }
    let value = pages.get(key, versions)
    if (value === undefined) {
      const { rows, ...rest } = await reader.read(target, { role: query.role }, page, asker)
      value = toPage({ rows: rows.map(fromItemRow), ...rest }, page)
      pages.set(key, versions, value, pageSize(value))
    }
    return { tag, notModified: false, value }
  }

  return {
    findById,
    findBySubject,
    upsert,
    /** SPEC 5.5: the caller's local user, provisioned from userinfo on first use. */
    localUser,

    /** GET /v2/users/me: the caller's local user (created on first call). */
    async me (caller: Caller, conditional: Conditional): Promise<Revalidated<LocalUser>> {
      return await oneUser('me', conditional, async () => await localUser(caller))
    },

    /** GET /v2/users/{id}: the caller, or anyone for Admin or higher; 403 below Admin for another id, whether or not it exists. */
    async visible (caller: Caller, id: number, conditional: Conditional): Promise<Revalidated<LocalUser>> {
      return await oneUser(`user:${id}`, conditional, async () => await visibleUser({ findById }, await localUser(caller), caller.role, id))
    },

    /** GET /v2/users: the page the query asks for, or 304 when the client's copy is current; a walk is a heavy read for `asker`. */
    async listPage (query: UserListQuery, conditional: Conditional, asker: Asker): Promise<Revalidated<Page<LocalUser>>> {
      const page = pageRequest('users', query, USER_SORT_FIELDS)
      const key = JSON.stringify([query.role, page])
      try {
        const on = reads.pick()
        try {
          return await listOn(on.db, key, query, page, conditional, asker)
        } catch (err) {
          return await listOn(on.fallback(err), key, query, page, conditional, asker)
        }
      } catch (err) {
        return failedRetrieving(err)
      }
    }
  }
}

export type UsersRepository = ReturnType<typeof createUsersRepository>
