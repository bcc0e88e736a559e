import { eq, sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { users, type ROLE_VALUES, type UserRow } from '../db/schema.js'
import type { ReadRouter } from '../db/read-router.js'
import type { Conditional, Revalidated } from '../http-cache/entity-tag.js'
import type { PageRequest, PageResult } from '../pages/request.js'
import { USER_PAGE_BYTES, pageBytes, userBytes } from '../memory/budget.js'
import { VersionedCache, VersionGate } from '../http-cache/version-cache.js'
import { createCollectionReader } from '../pages/reader.js'
import type { LocalUser, UserSort } from '../schemas/users.js'
import { hashKey, isoTimestamp, placeholder } from '../pages/spec.js'

export type Role = typeof ROLE_VALUES[number]

export interface UserProfile {
  subjectId: string
  email: string | null
  name: string | null
  role: string
}

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
  filters: { role: { condition: sql`m.role = ${placeholder('role')}::text`, key: hashKey('role') } },
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

const pageSize = (page: PageResult<LocalUser>) => pageBytes(page, userBytes)

export function createUsersRepository (db: Database, read: ReadRouter = async (run) => run(db)) {
  const pages = new VersionedCache<PageResult<LocalUser>>(['users'], USER_PAGE_BYTES, pageSize)
  const gate = new VersionGate(['users'])
  return {
    /**
     * A read of local users on the primary, tagged with the users table's version (CONTRACT 12): when
     * the client's copy is current, `compute` never runs. `exists` says whether a value is one.
     */
    revalidate<T> (key: string, conditional: Conditional, compute: () => Promise<T>, exists?: (value: T) => boolean): Promise<Revalidated<T>> {
      return gate.revalidate(db, key, conditional, compute, exists)
    },

    async findById (id: number): Promise<LocalUser | null> {
      const [row] = await db.select().from(users).where(eq(users.id, id))
      return row === undefined ? null : toUser(row)
    },

    async findBySubject (subjectId: string): Promise<LocalUser | null> {
      const [row] = await db.select().from(users).where(eq(users.subjectId, subjectId))
      return row === undefined ? null : toUser(row)
    },

    /** Creates the row for a subject, or refreshes it if another request created it first. */
    async upsert (profile: UserProfile): Promise<LocalUser> {
      const [row] = await db.insert(users).values(profile)
        .onConflictDoUpdate({
          target: users.subjectId,
          set: { email: profile.email, name: profile.name, role: profile.role, updatedAt: sql`now()` }
        })
        .returning()
      if (row === undefined) throw new Error('upsert returned no row')
      return toUser(row)
    },

    list (filters: UserFilters, page: PageRequest<UserSort>, conditional: Conditional): Promise<Revalidated<PageResult<LocalUser>>> {
      const key = JSON.stringify([filters.role, page])
      return read((target) => pages.revalidate(target, key, conditional, async () => {
        const { rows, ...rest } = await reader.read(target, filters, page)
        return { rows: rows.map(fromItemRow), ...rest }
      }))
    }
  }
}

export type UsersRepository = ReturnType<typeof createUsersRepository>
