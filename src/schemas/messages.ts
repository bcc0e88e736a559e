import { Type, type Static } from '@sinclair/typebox'
import { PRIORITY_VALUES } from '../db/schema.js'
import { MESSAGE_SORT_FIELDS } from '../repositories/messages.js'
import { collectionQuery } from '../lib/pagination.js'
import { DbText, StringEnum, Timestamp } from './common.js'

export const Priority = StringEnum(PRIORITY_VALUES, { description: 'Defaults to normal', examples: ['normal'] })

export const MessageSchema = Type.Object({
  id: Type.Integer({ examples: [42] }),
  content: Type.String({ examples: ['The deploy is done.'] }),
  subject: Type.Union([Type.String(), Type.Null()], { examples: ['Release 2.4'] }),
  priority: Priority,
  author: Type.Object({
    id: Type.Integer({ examples: [7] }),
    name: Type.Union([Type.String(), Type.Null()], { examples: ['Alice'] })
  }),
  createdAt: Timestamp
}, { $id: 'Message', title: 'Message' })

export const CreateMessageBody = Type.Object({
  // required: whitespace-only content counts as empty (CONTRACT 5).
  content: DbText({ required: true, maxLength: 4000, examples: ['The deploy is done.'] }),
  subject: Type.Optional(DbText({ maxLength: 200, examples: ['Release 2.4'] })),
  priority: Type.Optional(Priority)
}, { examples: [{ content: 'The deploy is done.', subject: 'Release 2.4', priority: 'high' }] })
export type CreateMessageBody = Static<typeof CreateMessageBody>

const MessageFilters = {
  priority: Type.Optional(StringEnum(PRIORITY_VALUES, { description: 'Only messages of this priority' })),
  authorId: Type.Optional(Type.Number({ description: 'Only messages by this local user id (a number that is no id matches nothing)' })),
  subject: Type.Optional(DbText({ maxLength: 200, description: 'Only messages with exactly this subject' }))
}

export const MessageListQuery = collectionQuery(MESSAGE_SORT_FIELDS, MessageFilters)
export type MessageListQuery = Static<typeof MessageListQuery>

export const MessageSearchQuery = collectionQuery(MESSAGE_SORT_FIELDS, {
  q: Type.Optional(DbText({ maxLength: 200, description: 'Text to find in content or subject (case-insensitive; % and _ match themselves)', examples: ['deploy'] })),
  ...MessageFilters
})
export type MessageSearchQuery = Static<typeof MessageSearchQuery>
