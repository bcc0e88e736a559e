import { context, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api'
import {
  ATTR_DB_NAMESPACE, ATTR_DB_OPERATION_NAME, ATTR_DB_QUERY_SUMMARY, ATTR_DB_QUERY_TEXT, ATTR_DB_RESPONSE_STATUS_CODE, ATTR_DB_SYSTEM_NAME,
  ATTR_ERROR_TYPE, ATTR_SERVER_ADDRESS, ATTR_SERVER_PORT, DB_SYSTEM_NAME_VALUE_POSTGRESQL
} from '@opentelemetry/semantic-conventions'
import type { QueryOptions } from '@electric-sql/pglite'
import type { PgliteQueries, PgliteThread, PgliteTransaction } from './pglite-thread.js'

// CONTRACT 15: one span per database statement. The postgres driver has no instrumentation of its
// own, and PGlite runs in a thread of its own (pglite-thread.ts): both are traced here, on this
// thread, where the statement is sent. Only @opentelemetry/api is used: without a started SDK it has
// no context manager, and the parent lookup below finds nothing at the cost of one property read.
// A span records the statement text as sent: every value the service passes is a parameter ($1…),
// and parameters are never recorded.

const TRACER = 'messages-api/db'

/** Which server ran a statement: the primary, or a replica the read router chose (CONTRACT 11). */
export const SERVER_ROLE = 'messages_api.db.role'

export interface StatementServer {
  role: 'primary' | 'replica'
  /** The database's name (db.namespace); PGlite has only its own. */
  database?: string
}

// Spans under which statements are not traced: a held long-poll's or an open stream's request,
// whose context the instance's watcher inherits when that request starts it (src/tracing/live-span.ts).
// The watcher reads for every client, every few milliseconds, and is nobody's request.
const quiet = new WeakSet<Span>()

/** From now on, no statement span goes under `span`, nor under work that inherits its context. */
export function quietStatementsUnder (span: Span): void {
  quiet.add(span)
}

export function statementsQuietUnder (span: Span): boolean {
  return quiet.has(span)
}

/** The span a new span goes under: one still recording (a sampled request not yet answered). */
function parentSpan (): Span | undefined {
  const span = trace.getSpan(context.active())
  return span !== undefined && span.isRecording() && !quiet.has(span) ? span : undefined
}

const DML = new Set(['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'MERGE'])
const WRITES = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE'])
const TARGET_AFTER: Record<string, string> = { SELECT: 'FROM', DELETE: 'FROM', INSERT: 'INTO', MERGE: 'INTO' }

/**
 * The words of a statement outside parentheses, strings and comments, where '(' stands for a
 * parenthesised part; and the words directly inside each of those parts, in order.
 */
function topLevelWords (sql: string): { words: string[], parts: string[][] } {
  const words: string[] = []
  const parts: string[][] = []
  let depth = 0
  const push = (word: string): void => {
    if (depth === 0) words.push(word)
    else if (depth === 1) parts.at(-1)?.push(word)
  }
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i] as string
    if (c === "'" || c === '"') {
      const end = sql.indexOf(c, i + 1)
      if (c === '"') push(sql.slice(i + 1, end < 0 ? undefined : end))
      i = end < 0 ? sql.length : end
    } else if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i)
      i = end < 0 ? sql.length : end
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2)
      i = end < 0 ? sql.length : end + 1
    } else if (c === '(') {
      if (depth === 0) {
        words.push('(')
        parts.push([])
      }
      depth++
    } else if (c === ')') {
      depth--
    } else if (/[A-Za-z_]/.test(c)) {
      const word = /^[\w$.]+/.exec(sql.slice(i, i + 128))?.[0] ?? c
      push(word)
      i += word.length - 1
    }
  }
  return { words, parts }
}

interface Summary { operation: string, name: string }

/** The operation of one statement's words and the table it names, when that is one plain table. */
function operationOf (words: readonly string[]): { operation: string, target: string | undefined } {
  const operation = (words[0] ?? 'SQL').toUpperCase()
  const keyword = TARGET_AFTER[operation]
  const at = keyword === undefined ? (operation === 'UPDATE' ? 0 : -1) : words.findIndex((word) => word.toUpperCase() === keyword)
  const target = at < 0 ? undefined : words[at + 1]
  return { operation, target: target === '(' ? undefined : target }
}

/**
 * db.operation.name and the span's name (semantic conventions: `{operation} {target}`, the target
 * only when it is one plain table). A statement with common table expressions is named by what it
 * does: by the write one of them makes (`WITH inserted AS (INSERT INTO messages …) SELECT … FROM
 * inserted` is an INSERT into messages), else by its main statement.
 */
export function summarize (sql: string): Summary {
  const { words, parts } = topLevelWords(sql)
  let statement: readonly string[] = words
  if (words[0]?.toUpperCase() === 'WITH') {
    const write = parts.find((part) => WRITES.has(part[0]?.toUpperCase() ?? ''))
    const main = words.findIndex((word, i) => i > 0 && DML.has(word.toUpperCase()))
    statement = write ?? (main < 0 ? words : words.slice(main))
  }
  const { operation, target } = operationOf(statement)
  return { operation, name: target === undefined ? operation : `${operation} ${target}` }
}

// Statements are a fixed set of texts (values are parameters); the bound only guards against one
// built per request.
const summaries = new Map<string, Summary>()
function summaryOf (sql: string): Summary {
  let summary = summaries.get(sql)
  if (summary === undefined) {
    if (summaries.size >= 1000) summaries.clear()
    summary = summarize(sql)
    summaries.set(sql, summary)
  }
  return summary
}

/** A driver's or the server's class of failure: the SQLSTATE, or the driver's code, never the message (it can quote values). */
function failureOf (err: unknown): { type: string, sqlState?: string } {
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code === 'string' && code !== '') return /^[0-9A-Z]{5}$/.test(code) ? { type: code, sqlState: code } : { type: code }
  return { type: err instanceof Error ? err.name : 'Error' }
}

/**
 * Runs one statement under a span of its own, when the work it is done for is traced. Untraced, the
 * statement's own promise is returned as it is: no promise more per statement.
 */
export function traceStatement<T> (sql: string, server: StatementServer, run: () => Promise<T>): Promise<T> {
  return parentSpan() === undefined ? run() : traced(sql, server, run)
}

async function traced<T> (sql: string, server: StatementServer, run: () => Promise<T>): Promise<T> {
  const { operation, name } = summaryOf(sql)
  const span = trace.getTracer(TRACER).startSpan(name, {
    kind: SpanKind.CLIENT,
    attributes: {
      [ATTR_DB_SYSTEM_NAME]: DB_SYSTEM_NAME_VALUE_POSTGRESQL,
      [ATTR_DB_OPERATION_NAME]: operation,
      [ATTR_DB_QUERY_SUMMARY]: name,
      [ATTR_DB_QUERY_TEXT]: sql,
      [SERVER_ROLE]: server.role,
      ...(server.database === undefined ? {} : { [ATTR_DB_NAMESPACE]: server.database })
    }
  })
  try {
    return await run()
  } catch (err) {
    const failure = failureOf(err)
    span.setAttribute(ATTR_ERROR_TYPE, failure.type)
    if (failure.sqlState !== undefined) span.setAttribute(ATTR_DB_RESPONSE_STATUS_CODE, failure.sqlState)
    span.setStatus({ code: SpanStatusCode.ERROR })
    throw err
  } finally {
    span.end()
  }
}

const PGLITE: StatementServer = { role: 'primary' }

/** PGlite's calls as drizzle makes them, each statement traced on this side of the thread (transactions' included). */
function tracedQueries<Q extends PgliteQueries> (target: Q): Q {
  return new Proxy(target, {
    get (queries, property) {
      if (property === 'query') {
        return async (sql: string, params?: unknown[], options?: QueryOptions) =>
          await traceStatement(sql, PGLITE, async () => await queries.query(sql, params, options))
      }
      if (property === 'exec') return async (sql: string) => await traceStatement(sql, PGLITE, async () => await queries.exec(sql))
      if (property === 'transaction' && 'transaction' in queries) {
        const thread = queries as unknown as PgliteThread
        return async <T>(body: (tx: PgliteTransaction) => Promise<T>) => await thread.transaction(async (tx) => await body(tracedQueries(tx)))
      }
      // The thread keeps its state in private fields: its own methods run on it, not on the proxy.
      const value: unknown = Reflect.get(queries, property, queries)
      return typeof value === 'function' ? value.bind(queries) : value
    }
  })
}

export function tracedPglite (thread: PgliteThread): PgliteThread {
  return tracedQueries(thread)
}

/**
 * CONTRACT 14 and 15: a new connection to the primary that had to wait for an election (a failover
 * under way, or no primary known) shows in the trace of the request it was opened for, with the
 * host it got, or none (the request is answered 503). Returns the span's end, or undefined when
 * nothing is traced.
 */
export function primaryWait (): ((host: { host: string, port: number } | undefined) => void) | undefined {
  if (parentSpan() === undefined) return undefined
  const span = trace.getTracer(TRACER).startSpan('wait for database primary', {
    kind: SpanKind.INTERNAL,
    attributes: { [ATTR_DB_SYSTEM_NAME]: DB_SYSTEM_NAME_VALUE_POSTGRESQL }
  })
  return (host) => {
    if (host === undefined) {
      span.setAttribute(ATTR_ERROR_TYPE, 'no_writable_primary')
      span.setStatus({ code: SpanStatusCode.ERROR })
    } else {
      span.setAttributes({ [ATTR_SERVER_ADDRESS]: host.host, [ATTR_SERVER_PORT]: host.port })
    }
    span.end()
  }
}
