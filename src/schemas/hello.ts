import { Type } from '@sinclair/typebox'

export const HelloSchema = Type.Object({
  message: Type.String({ examples: ['Hello, alice@example.com!'] }),
  role: Type.String({ examples: ['Admin'] })
}, { $id: 'Hello', title: 'Hello', examples: [{ message: 'Hello, alice@example.com!', role: 'Admin' }] })
