import { Type, type Static, type TSchema, type TUnsafe } from '@sinclair/typebox'

/** A string enum as `{ type: 'string', enum }`, so Ajv reports one `enum` error naming every value. */
export const StringEnum = <const T extends readonly string[]>(values: T, options: Record<string, unknown> = {}): TUnsafe<T[number]> =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options })

/** Refers to a shared schema by its $id; TypeBox 0.34 deprecates Type.Ref(schema). */
export function Ref<T extends TSchema> (schema: T): TUnsafe<Static<T>> {
  if (schema.$id === undefined) throw new Error('Ref needs a schema with an $id')
  return Type.Unsafe<Static<T>>(Type.Ref(schema.$id))
}

export const ErrorSchema = Type.Object({
  error: Type.String({ description: 'What went wrong, in one sentence' }),
  details: Type.Optional(Type.Array(Type.String(), { description: 'One entry per failing field (validation errors only)' })),
  stack: Type.Optional(Type.String({ description: 'Only when NODE_ENV=development' }))
}, { $id: 'Error', title: 'Error', examples: [{ error: 'Validation failed', details: ['content is required and must be a string'] }] })

export const ErrorRef = Ref(ErrorSchema)

// SPEC 4.7 rule 4 / CONTRACT 10: Number(id) must be a safe integer above zero. Ajv's coercion
// of a path segment to an integer follows Number(), so the schema states the rule exactly.
export const IdParams = Type.Object({
  id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'A positive integer', examples: [1] })
})
export type IdParams = Static<typeof IdParams>

export const Timestamp = Type.String({ format: 'date-time', examples: ['2026-01-01T12:00:00.000Z'] })

export const HealthSchema = Type.Object({ ok: Type.Literal(true) })

/** The security requirement of every protected operation (SPEC 4.6). */
export const bearerAuth = [{ bearerAuth: [] }]
