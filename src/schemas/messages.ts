import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { PRIORITY_VALUES } from '../db/schema.js'
import { collectionQuery, LenientInteger, pageSchema } from './pagination.js'
import { DbText, DOCUMENTED_REQUIRED, Ref, StringEnum, Timestamp } from './common.js'

/** Who wrote a message: the local user's id and name. */
export const AuthorSchema = Type.Object({
  id: Type.Integer({ examples: [7] }),
  name: Type.Union([Type.String(), Type.Null()], { examples: ['Alice'] })
}, { $id: 'Author', title: 'Author', examples: [{ id: 7, name: 'Alice' }] })

export const Priority = StringEnum(PRIORITY_VALUES, { description: 'Defaults to normal', examples: ['normal'] })

export const MessageSchema = Type.Object({
  id: Type.Integer({ examples: [42] }),
  content: Type.String({ examples: ['The deploy is done.'] }),
  subject: Type.Union([Type.String(), Type.Null()], { examples: ['Release 2.4'] }),
  priority: Priority,
  author: Ref(AuthorSchema),
  createdAt: Timestamp
}, {
  $id: 'Message',
  title: 'Message',
  examples: [{ id: 42, content: 'The deploy is done.', subject: 'Release 2.4', priority: 'high', author: { id: 7, name: 'Alice' }, createdAt: '2026-01-01T12:00:00.000Z' }]
})

export type Message = Static<typeof MessageSchema>
export type Priority = Static<typeof Priority>

export const MESSAGE_SORT_FIELDS = ['id', 'createdAt', 'priority', 'subject'] as const
export type MessageSort = typeof MESSAGE_SORT_FIELDS[number]

export const MessagePageSchema = pageSchema(MessageSchema, 'MessagePage')

export const CreateMessageBody = Type.Object({
  // required: whitespace-only content counts as empty (CONTRACT 5).
  content: DbText({ required: true, maxLength: 4000, examples: ['The deploy is done.'] }),
  subject: Type.Optional(DbText({ maxLength: 200, examples: ['Release 2.4'] })),
  priority: Type.Optional(Priority)
}, { $id: 'NewMessage', title: 'NewMessage', examples: [{ content: 'The deploy is done.', subject: 'Release 2.4', priority: 'high' }] })
export type CreateMessageBody = Static<typeof CreateMessageBody>
// What the repository writes: a create's body, or a message without a subject given as null.
export type NewMessage = Omit<CreateMessageBody, 'subject'> & { subject?: string | null }

// CONTRACT 12. Declared for the documentation only: any string passes here, and parseIdempotencyKey
// answers a malformed key with its own 400 rather than a validation failure.
export const IdempotencyKeyHeaders = Type.Object({
  'Idempotency-Key': Type.Optional(Type.String({
    description: 'Makes the create safe to retry: 1 to 255 visible ASCII characters (0x21-0x7E), optionally in double quotes. ' +
      'The same caller sending the same key and the same JSON body again gets the first 201 again, byte for byte, with ' +
      '`Idempotent-Replayed: true`, and no second message; a different body gets 422; while the first is still running, 409. ' +
      'Keys are kept at least IDEMPOTENCY_TTL_HOURS (default 24).',
    examples: ['8e03978e-40d5-43e8-bc93-6894a57f9324']
  }))
})

/** The 201 of a create: the message, where it lives, and whether it is a stored answer given again. */
export function createdMessageResponse<T extends TSchema> (message: T) {
  return Type.Unsafe<Static<T>>({
    ...message,
    description: 'Created',
    headers: {
      Location: { type: 'string', description: 'Path of the new message', examples: ['/v2/messages/42'] },
      'Idempotent-Replayed': { type: 'string', enum: ['true'], description: 'Present when the body is the stored answer to an earlier request with the same Idempotency-Key' }
    }
  })
}

/** 409: the key's first request is still running. */
export const keyInProgressResponse = <T extends TSchema>(error: T) => Type.Unsafe<Static<T>>({
  ...error,
  description: 'A request with this Idempotency-Key is still in progress; retry after Retry-After seconds',
  headers: { 'Retry-After': { type: 'integer', description: 'Seconds to wait before retrying', examples: [1] } }
})

const RETRY_AFTER_HEADER = { 'Retry-After': { type: 'integer', description: 'Seconds to wait before retrying', examples: [1] } }

/** 200 of the change feed: JSON, or with `Accept: text/event-stream` a stream of those answers as events. */
export const changesResponse = <T extends TSchema>(answer: T) => Type.Unsafe<Static<T>>({
  description: 'An answer; with `Accept: text/event-stream`, a stream of answers, one event each',
  content: {
    'application/json': { schema: answer },
    'text/event-stream': {
      schema: {
        type: 'string',
        description: 'Server-Sent Events. Each answer with changes is one event: `id` is its `next` (sent back as Last-Event-ID on reconnection), ' +
          '`event` is `changes`, `data` its JSON on one line. A `: keep-alive` comment follows every quiet LIVE_HEARTBEAT_S (15) seconds.',
        examples: ['id: MS5jLjEuNzQ0LjAuMTc5NTQ3NTI2NTM3MQ\nevent: changes\ndata: {"data":[{"op":"delete","id":7}],"next":"MS5jLjEuNzQ0LjAuMTc5NTQ3NTI2NTM3MQ","hasMore":false}\n\n']
      }
    }
  }
})

/** 429 of a live request: this client holds LIVE_MAX_PER_CLIENT long-polls and streams already (or its rate limit is spent). */
export const liveClientLimitResponse = <T extends TSchema>(error: T) => Type.Unsafe<Static<T>>({
  ...error,
  description: 'Too many requests: the rate limit of this caller, or LIVE_MAX_PER_CLIENT held long-polls and streams from this address; retry after Retry-After seconds',
  headers: RETRY_AFTER_HEADER
})

/** 503 of a live request: every live slot of the instance is taken, or it is shutting down. */
export const liveFullResponse = <T extends TSchema>(error: T) => Type.Unsafe<Static<T>>({
  ...error,
  description: 'Service unavailable: overloaded, shutting down, or LIVE_MAX_CONNECTIONS held long-polls and streams on this instance; retry after Retry-After seconds',
  headers: RETRY_AFTER_HEADER
})

/** 422: the key was first used with another body. */
export const keyReusedResponse = <T extends TSchema>(error: T) => Type.Unsafe<Static<T>>({
  ...error,
  description: 'Idempotency-Key was used with a different request body'
})

const MessageFilters = {
  priority: Type.Optional(StringEnum(PRIORITY_VALUES, { description: 'Only messages of this priority' })),
  authorId: Type.Optional(Type.Number({ description: 'Only messages by this local user id (a number that is no id matches nothing)' })),
  subject: Type.Optional(DbText({ maxLength: 200, description: 'Only messages with exactly this subject' }))
}
export const MessageFilterSchema = Type.Object(MessageFilters)
export type MessageFilters = Static<typeof MessageFilterSchema>

export const MessageListQuery = collectionQuery(MESSAGE_SORT_FIELDS, MessageFilters)
export type MessageListQuery = Static<typeof MessageListQuery>

export const MessageSearchQuery = collectionQuery(MESSAGE_SORT_FIELDS, {
  q: Type.Optional(DbText({ maxLength: 200, description: 'Text to find in content or subject (case-insensitive; % and _ match themselves)', examples: ['deploy'], [DOCUMENTED_REQUIRED]: true })),
  ...MessageFilters
})
export type MessageSearchQuery = Static<typeof MessageSearchQuery>

// CONTRACT 12, delta sync.
export const SYNC_DEFAULT_LIMIT = 100
export const SYNC_MAX_LIMIT = 1000
// CONTRACT 13: seconds a long-poll may be held.
export const SYNC_MAX_WAIT = 60

export const MessageChangesQuery = Type.Object({
  since: Type.Optional(Type.String({
    description: 'The `next` of the previous answer. Without it the feed starts with a copy of every message. ' +
      'A token older than SYNC_RETENTION_HOURS (default 720), or issued before the messages were truncated, is 410: start again without it.',
    examples: ['MS5jLjEuNzQ0LjAuMTc5NTQ3NTI2NTM3MQ']
  })),
  limit: Type.Optional(LenientInteger({ minimum: 1, maximum: SYNC_MAX_LIMIT, default: SYNC_DEFAULT_LIMIT },
    `Entries per answer, clamped into 1..${SYNC_MAX_LIMIT}. Missing or invalid: ${SYNC_DEFAULT_LIMIT}.`)),
  wait: Type.Optional(LenientInteger({ minimum: 0, maximum: SYNC_MAX_WAIT, default: 0 },
    'Long-poll: with `since`, when nothing has changed, hold the request up to this many seconds and answer as soon as something does. ' +
    `Clamped into 0..${SYNC_MAX_WAIT}; missing or invalid: 0 (answer at once). Ignored without \`since\`.`))
})
export type MessageChangesQuery = Static<typeof MessageChangesQuery>

const Upsert = Type.Object({
  op: Type.Literal('upsert'),
  id: Type.Integer({ examples: [12] }),
  message: Ref(MessageSchema)
}, { title: 'MessageUpsert', description: 'Created or changed: store or replace it' })

const Delete = Type.Object({
  op: Type.Literal('delete'),
  id: Type.Integer({ examples: [7] })
}, { title: 'MessageDelete', description: 'Deleted: drop it if held (it may be an id never sent)' })

export const MessageChangesSchema = Type.Object({
  data: Type.Array(Type.Union([Upsert, Delete]), { description: 'Apply in order: each id appears at most once in an answer' }),
  next: Type.String({ description: 'Pass as `since` on the next call' }),
  hasMore: Type.Boolean({ description: 'True: call again at once with `next`. False: caught up; poll again later with `next`' })
}, {
  $id: 'MessageChanges',
  title: 'MessageChanges',
  examples: [{
    data: [
      { op: 'upsert', id: 12, message: { id: 12, content: 'The deploy is done.', subject: 'Release 2.4', priority: 'high', author: { id: 7, name: 'Alice' }, createdAt: '2026-01-01T12:00:00.000Z' } },
      { op: 'delete', id: 7 }
    ],
    next: 'MS5jLjEuNzQ0LjAuMTc5NTQ3NTI2NTM3MQ',
    hasMore: false
  }]
})
