import { sql, type SQL } from 'drizzle-orm'
import { isStorableText } from '../schemas/common.js'
import { placeholder, type CollectionSpec, type KeyType } from './spec.js'

// A sort key as a cursor carries it (CONTRACT 12): text PostgreSQL renders and reads back exactly, so
// that a seek from a cursor compares keys in the database's own order and collation, never in
// JavaScript's. A key that cannot be read back as its sort's type is refused before any statement runs.

export function keyTextSql (expr: string, type: KeyType): string {
  if (type === 'id') return 'NULL::text'
  if (type === 'timestamptz') return `(extract(epoch FROM ${expr}) * 1000000)::bigint::text`
  return `${expr}::text`
}

export function keyParamSql (type: KeyType): SQL {
  return keyFromText(sql`${placeholder('k')}`, type)
}

/** A key as a cursor carries it (text), read back as the sort's type. */
export function keyFromText (k: SQL, type: KeyType): SQL {
  if (type === 'timestamptz') return sql`('epoch'::timestamptz + ${k}::bigint * interval '1 microsecond')`
  if (typeof type === 'object') return sql`${k}::${sql.raw(type.enum)}`
  return sql`${k}::${sql.raw(type === 'id' ? 'text' : type)}`
}

const KEY_PATTERNS = { integer: /^-?\d{1,10}$/, numeric: /^-?\d{1,30}(\.\d{1,30})?$/, timestamptz: /^-?\d{1,19}$/ }
const INT4_MAX = 2_147_483_647
// The epoch microseconds keyFromText reads back into a timestamp without an error: from PostgreSQL's
// first timestamp (4714-11-24 BC) up to where the product with an interval (a float8, so rounded)
// still fits the interval's 64 bits. Every key the service issues lies between them.
const FIRST_TIMESTAMP_US = -210_866_803_200_000_000n
const LAST_TIMESTAMP_US = 2n ** 63n - 1024n

/**
 * Whether a cursor's key can be read back as its sort's type: a crafted one (a NUL or a lone surrogate
 * in a text, a number out of its type's range, a time PostgreSQL cannot hold) is a 400, not a 500.
 */
export function validKey (key: string | null, type: KeyType): boolean {
  if (type === 'id') return key === null
  if (key === null) return true
  if (type === 'text') return isStorableText(key)
  if (typeof type === 'object') return type.values.includes(key)
  if (type === 'integer') return KEY_PATTERNS.integer.test(key) && Math.abs(Number(key)) <= INT4_MAX
  if (type === 'timestamptz') return KEY_PATTERNS.timestamptz.test(key) && BigInt(key) >= FIRST_TIMESTAMP_US && BigInt(key) <= LAST_TIMESTAMP_US
  return KEY_PATTERNS[type].test(key)
}

export const keyColumn = <S extends string, F extends string>(spec: CollectionSpec<S, F>, sort: S) => sql.raw(`${keyTextSql(spec.sorts[sort], spec.keys[sort])} AS cursor_key`)

/** The key of a cursor key as text, or NULL for the sort by id. */
export const nearKey = <S extends string, F extends string>(spec: CollectionSpec<S, F>, sort: S, text: SQL): SQL => spec.keys[sort] === 'id' ? sql`NULL::text` : keyFromText(text, spec.keys[sort])
