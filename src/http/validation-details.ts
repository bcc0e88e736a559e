import type { FastifySchemaValidationError } from 'fastify/types/schema.js'

interface VerboseError extends FastifySchemaValidationError {
  // Present because the Ajv instances run with `verbose: true`.
  schema?: unknown
  parentSchema?: Record<string, unknown>
  data?: unknown
}

function fieldName (error: VerboseError): string {
  if (error.keyword === 'required') return String(error.params.missingProperty)
  const path = error.instancePath.split('/').filter(Boolean).join('.')
  return path === '' ? 'body' : path
}

const looksNumeric = (value: unknown): boolean =>
  typeof value === 'number' || (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value)))

// A string that must not be empty is a "required string" in the sense of SPEC 7.3.
const isRequiredString = (schema: Record<string, unknown> | undefined): boolean =>
  schema?.type === 'string' && typeof schema.minLength === 'number' && schema.minLength >= 1

function propertySchema (error: VerboseError, name: string): Record<string, unknown> | undefined {
  const properties = error.parentSchema?.properties as Record<string, Record<string, unknown>> | undefined
  return properties?.[name]
}

// Empty and whitespace-only both count as "missing" for a required string.
const blankOrInvalid = (schema: Record<string, unknown> | undefined, field: string): string =>
  isRequiredString(schema) ? `${field} is required and must be a string` : `${field} has an invalid format`

function describe (error: VerboseError, field: string): string {
  const schema = error.parentSchema
  switch (error.keyword) {
    case 'required':
      return propertySchema(error, field)?.type === 'string'
        ? `${field} is required and must be a string`
        : `${field} is required`
    case 'type': {
      const expected = String(error.params.type)
      if (expected === 'string') return isRequiredString(schema) ? `${field} is required and must be a string` : `${field} must be a string`
      if (expected === 'number') return `${field} must be a number`
      if (expected === 'integer') return looksNumeric(error.data) ? `${field} must be an integer` : `${field} must be a number`
      if (expected === 'object') return `${field} must be an object`
      return `${field} must be of type ${expected}`
    }
    case 'pattern':
      // A text column cannot hold U+0000 nor a lone surrogate (src/schemas/common.ts DbText).
      if (typeof error.data === 'string' && error.data.includes('\u0000')) return `${field} must not contain the NUL character`
      if (typeof error.data === 'string' && !error.data.isWellFormed()) return `${field} must be valid Unicode text`
      return blankOrInvalid(schema, field)
    case 'minLength':
      return blankOrInvalid(schema, field)
    case 'maxLength':
      return `${field} must be at most ${String(error.params.limit)} characters`
    case 'enum':
      return `${field} must be one of ${(error.params.allowedValues as unknown[]).join(', ')}`
    case 'minimum':
      return `${field} must be at least ${String(error.params.limit)}`
    case 'maximum':
      return `${field} must be at most ${String(error.params.limit)}`
    default:
      return `${field} ${error.message ?? 'is invalid'}`
  }
}

/**
 * Turns Ajv's errors into the `details` of SPEC 7.2: one sentence per failing field, in the order
 * Ajv found them. A missing body reports every required field of the schema as missing.
 */
export function validationDetails (errors: readonly FastifySchemaValidationError[]): string[] {
  const details = new Map<string, string>()
  for (const error of errors as readonly VerboseError[]) {
    if (error.instancePath === '' && error.keyword === 'type' && (error.data === undefined || error.data === null)) {
      const required = (error.parentSchema?.required ?? []) as string[]
      for (const name of required) {
        if (!details.has(name)) details.set(name, describe({ ...error, keyword: 'required', params: { missingProperty: name } }, name))
      }
      continue
    }
    const field = fieldName(error)
    if (!details.has(field)) details.set(field, describe(error, field))
  }
  return [...details.values()]
}

/** The first path parameter that failed validation. */
export function failedParam (errors: readonly FastifySchemaValidationError[]): string {
  const first = errors[0]
  if (first === undefined) return 'id'
  return first.keyword === 'required' ? String(first.params.missingProperty) : first.instancePath.split('/').filter(Boolean)[0] ?? 'id'
}
