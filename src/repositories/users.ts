import { and, eq, sql, type SQL } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { users, type ROLE_VALUES, type UserRow } from '../db/schema.js'
import { orderBy, type PageRequest } from '../lib/pagination.js'
import { countRows } from './count.js'

export type Role = typeof ROLE_VALUES[number]

export interface LocalUser {
  id: number
  subjectId: string
  email: string | null
  name: string | null
  role: string
  createdAt: string
  updatedAt: string
}

export interface UserProfile {
  subjectId: string
  email: string | null
  name: string | null
  role: string
}

export interface UserFilters {
  role?: Role
}

export const USER_SORT_FIELDS = ['id', 'name', 'email', 'role', 'createdAt'] as const
export type UserSort = typeof USER_SORT_FIELDS[number]

const toUser = (row: UserRow): LocalUser => ({
  id: row.id,
  subjectId: row.subjectId,
  email: row.email,
  name: row.name,
  role: row.role,
  createdAt: row.createdAt.toISOString(),
  updatedAt: row.updatedAt.toISOString()
})

export function createUsersRepository (db: Database) {
  return {
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

    async list (filters: UserFilters, page: PageRequest<UserSort>): Promise<{ rows: LocalUser[], total: number }> {
      const where: SQL | undefined = and(filters.role === undefined ? undefined : eq(users.role, filters.role))
      const [rows, total] = await Promise.all([
        db.select().from(users).where(where)
          .orderBy(...orderBy(users[page.sort], page.order, users.id))
          .limit(page.limit).offset(page.offset).prepare('users_page').execute(),
        countRows(db, users, where, 'users_count')
      ])
      return { rows: rows.map(toUser), total }
    }
  }
}

export type UsersRepository = ReturnType<typeof createUsersRepository>
