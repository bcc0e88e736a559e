import type { PGliteOptions } from '@electric-sql/pglite'

// The messages between the service and the PGlite thread. Everything in them is structured-clone
// data: functions (drizzle's parsers) cannot cross a thread, so they travel as what they mean.

/** PGlite's WebAssembly, compiled, and its file system bundle: made once per process, shared by every thread. */
export interface PgliteRuntime {
  wasmModule: NonNullable<PGliteOptions['pgliteWasmModule']>
  fsBundle: Blob
}

export interface WorkerOptions {
  /** A data directory, or undefined for memory://. */
  dataDir: string | undefined
  runtime?: PgliteRuntime
}

export type Request =
  | {
    id: number
    op: 'query'
    sql: string
    params: unknown[] | undefined
    rowMode: 'object' | 'array' | undefined
    /** Type OIDs whose values are returned as the text PostgreSQL sent (drizzle reads dates this way). */
    textTypes: number[]
    blob: Blob | undefined
    transaction: number | undefined
  }
  | { id: number, op: 'exec', sql: string, transaction: number | undefined }
  | { id: number, op: 'begin' }
  | { id: number, op: 'end', transaction: number, commit: boolean }
  | { id: number, op: 'close' }

/** Every request is answered once, by its id; id 0 is the thread's start-up. */
export type Reply =
  | { id: number, ok: true, result: unknown }
  | { id: number, ok: false, error: SerializedError }

/** A PostgreSQL error's fields (SQLSTATE code, constraint, detail...), without its stack. */
export type SerializedError = Record<string, string | number | boolean | undefined> & { message: string }

// PGlite copies the failed query and its parameters into its errors; those stay in the thread.
const KEPT_BACK = new Set(['stack', 'query', 'params', 'queryOptions'])

export function serializeError (err: unknown): SerializedError {
  if (!(err instanceof Error)) return { message: String(err) }
  const fields: SerializedError = { name: err.name, message: err.message }
  for (const [key, value] of Object.entries(err)) {
    if (KEPT_BACK.has(key)) continue
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') fields[key] = value
  }
  return fields
}

/** The error again, on the caller's side, with the caller's stack (where the query was made). */
export function deserializeError (fields: SerializedError): Error {
  const err = new Error(fields.message)
  for (const [key, value] of Object.entries(fields)) {
    if (key !== 'message') (err as unknown as Record<string, unknown>)[key] = value
  }
  return err
}
