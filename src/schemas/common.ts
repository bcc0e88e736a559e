import { Type, type Static, type StringOptions, type TSchema, type TString, type TUnsafe } from '@sinclair/typebox'

/** A string enum as `{ type: 'string', enum }`, so Ajv reports one `enum` error naming every value. */
export const StringEnum = <const T extends readonly string[]>(values: T, options: Record<string, unknown> = {}): TUnsafe<T[number]> =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options })

/** Refers to a shared schema by its $id; TypeBox 0.34 deprecates Type.Ref(schema). */
export function Ref<T extends TSchema> (schema: T): TUnsafe<Static<T>> {
  if (schema.$id === undefined) throw new Error('Ref needs a schema with an $id')
  return Type.Unsafe<Static<T>>(Type.Ref(schema.$id))
}

// PostgreSQL text cannot hold U+0000 (the driver fails on it: a 500) nor a lone UTF-16 surrogate,
// which JSON can carry as "\ud800" and which the driver's UTF-8 encoding would silently store as
// U+FFFD: another text than the one sent. A string that is stored or compared in the database
// therefore refuses both at validation (400). A character is anything but NUL and a surrogate, or a
// surrogate pair: so the patterns mean the same with Ajv's `u` flag (where a pair is one code point)
// and without it (as a reader of the OpenAPI document may compile them). Both are anchored and
// linear, whatever the length of the string (Ajv runs them even past maxLength).
const TEXT_CHAR = '(?:[^\\u0000\\ud800-\\udfff]|[\\ud800-\\udbff][\\udc00-\\udfff])'
const STORABLE = `^${TEXT_CHAR}*$`
const NOT_BLANK_STORABLE = `^(?=[\\s\\S]*\\S)${TEXT_CHAR}*$`

/** A string bound for a text column; `required` also refuses empty and whitespace-only values. */
export function DbText (options: StringOptions & { required?: boolean } = {}): TString {
  const { required = false, ...rest } = options
  return Type.String(required ? { minLength: 1, pattern: NOT_BLANK_STORABLE, ...rest } : { pattern: STORABLE, ...rest })
}

/**
 * Whether PostgreSQL stores this string as it is: no NUL, no lone surrogate (DbText's rule), for text
 * that reaches the database without passing a schema (a cursor's key, a value from the identity provider).
 */
export const isStorableText = (value: string): boolean => !value.includes('\u0000') && value.isWellFormed()

// Documentation that the validation leaves to the handler, which answers with its own error or falls
// back (src/openapi/document.ts turns them into the parameter's enum and required):
/** The values that mean something (generated clients type them); any other value falls back (SPEC 4.9). */
export const DOCUMENTED_ENUM = 'x-enum'
/** A parameter the operation needs; its absence is answered by the handler's own 400, not a validation failure. */
export const DOCUMENTED_REQUIRED = 'x-required'
/** The longest value the document promises, below what validation takes: beyond it the request may not fit Node's header limit. */
export const DOCUMENTED_MAX_LENGTH = 'x-max-length'

export const ErrorSchema = Type.Object({
  error: Type.String({ description: 'What went wrong, in one sentence' }),
  details: Type.Optional(Type.Array(Type.String(), { description: 'One entry per failing field (validation errors only)' })),
  stack: Type.Optional(Type.String({ description: 'Only when NODE_ENV=development' }))
}, { $id: 'ErrorBody', title: 'ErrorBody', examples: [{ error: 'Validation failed', details: ['content is required and must be a string'] }] })

export const ErrorRef = Ref(ErrorSchema)

// SPEC 4.7 rule 4 / CONTRACT 10: Number(id) must be a safe integer above zero. Ajv's coercion
// of a path segment to an integer follows Number(), so the schema states the rule exactly.
export const IdParams = Type.Object({
  id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'A positive integer', examples: [1] })
})
export type IdParams = Static<typeof IdParams>

export const Timestamp = Type.String({ format: 'date-time', examples: ['2026-01-01T12:00:00.000Z'] })

export const HealthSchema = Type.Object({ ok: Type.Literal(true) }, { $id: 'Health', title: 'Health', examples: [{ ok: true }] })

/** The 304 of a conditional read (CONTRACT 12): no body, the same ETag. */
export const NotModified = Type.Null({ description: 'Not Modified: the ETag in If-None-Match is still current; no body' })

/** The security requirement of every protected operation (SPEC 4.6). */
export const bearerAuth = [{ bearerAuth: [] }]
