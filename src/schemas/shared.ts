import { PaginationSchema } from './pagination.js'
import { ErrorSchema, HealthSchema } from './common.js'
import { HelloSchema } from './hello.js'
import { AuthorSchema, CreateMessageBody, MessageChangesSchema, MessagePageSchema, MessageSchema } from './messages.js'
import { MoviePageSchema, MovieSchema } from './movies.js'
import { InputIdSchema, InputUserBody, InputUserSchema, UserPageSchema, UserSchema } from './users.js'
import { WeatherSchema } from './weather.js'

/**
 * Every schema with an $id, registered once with addSchema: routes refer to them (Ref), and the
 * OpenAPI document names each a component, so a generated client has a type of that name.
 */
export const SHARED_SCHEMAS = [
  ErrorSchema, PaginationSchema, HealthSchema, HelloSchema,
  AuthorSchema, MessageSchema, MessagePageSchema, CreateMessageBody, MessageChangesSchema,
  MovieSchema, MoviePageSchema,
  UserSchema, UserPageSchema, InputUserBody, InputUserSchema, InputIdSchema,
  WeatherSchema
]
