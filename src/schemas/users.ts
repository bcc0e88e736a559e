import { Type, type Static } from '@sinclair/typebox'
import { ROLE_VALUES } from '../db/schema.js'
import { collectionQuery, pageSchema } from './pagination.js'
import { StringEnum, Timestamp } from './common.js'

export const UserSchema = Type.Object({
  id: Type.Integer({ examples: [7] }),
  subjectId: Type.String({ examples: ['alice'] }),
  email: Type.Union([Type.String(), Type.Null()], { examples: ['alice@example.com'] }),
  name: Type.Union([Type.String(), Type.Null()], { examples: ['Alice'] }),
  role: StringEnum(ROLE_VALUES, { examples: ['User'] }),
  createdAt: Timestamp,
  updatedAt: Timestamp
}, {
  $id: 'User',
  title: 'User',
  examples: [{ id: 7, subjectId: 'alice', email: 'alice@example.com', name: 'Alice', role: 'User', createdAt: '2026-01-01T12:00:00.000Z', updatedAt: '2026-01-01T12:00:00.000Z' }]
})

// The column is text, not an enum: a role unknown to this version is still stored and shown as it is.
export type LocalUser = Omit<Static<typeof UserSchema>, 'role'> & { role: string }

export const USER_SORT_FIELDS = ['id', 'name', 'email', 'role', 'createdAt'] as const
export type UserSort = typeof USER_SORT_FIELDS[number]

export const UserPageSchema = pageSchema(UserSchema, 'UserPage')

export const UserListQuery = collectionQuery(USER_SORT_FIELDS, {
  role: Type.Optional(StringEnum(ROLE_VALUES, { description: 'Only users with this role' }))
})
export type UserListQuery = Static<typeof UserListQuery>

// SPEC 4.7: the input-validation router. Both fields required, both reported together.
export const InputUserBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200, pattern: '\\S', examples: ['Alice'] }),
  email: Type.String({ minLength: 1, maxLength: 320, pattern: '\\S', examples: ['alice@example.com'] })
}, { $id: 'InputUserRequest', title: 'InputUserRequest', examples: [{ name: 'Alice', email: 'alice@example.com' }] })
export type InputUserBody = Static<typeof InputUserBody>

export const InputUserSchema = Type.Object({
  name: Type.String(),
  email: Type.String()
}, { $id: 'InputUser', title: 'InputUser', examples: [{ name: 'Alice', email: 'alice@example.com' }] })

export const InputIdSchema = Type.Object({ id: Type.Integer({ examples: [42] }) }, { $id: 'InputId', title: 'InputId', examples: [{ id: 42 }] })
