// errors: the one error shape of SPEC 7 / CONTRACT 8 for every failure, Fastify's own included.
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { ConnectionError, FastifyBaseLogger, FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { isWriteRefused } from '../src/db/driver-errors.js'
import {
  BodyTooLargeError, DRAINING_CODE, HEAVY_READS_FULL_CODE, IDEMPOTENCY_KEY_IN_PROGRESS_CODE, InvalidIdError, isExpectedUnavailable, isPublicError,
  LIVE_CLIENT_LIMIT_CODE, LIVE_FULL_CODE, LOAD_SHED_CODE, MalformedJsonError, PRIMARY_UNAVAILABLE_CODE, PrimaryUnavailableError, RouteNotFoundError, UnsupportedMediaTypeError
} from '../src/errors.js'
import { failedParam, validationDetails } from '../src/http/validation-details.js'

export interface ErrorsPluginOptions {
  /** NODE_ENV=development: 500 bodies carry the real message and the stack (SPEC 7.4). */
  development: boolean
}

export interface ErrorBody {
  error: string
  details?: string[]
  stack?: string
}

// Fastify's own errors, mapped once to the public messages of CONTRACT 8.
const FASTIFY_ERRORS: Record<string, () => FastifyError> = {
  FST_ERR_CTP_INVALID_JSON_BODY: () => new MalformedJsonError(),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => new MalformedJsonError(),
  FST_ERR_CTP_BODY_TOO_LARGE: () => new BodyTooLargeError(),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () => new UnsupportedMediaTypeError(),
  FST_ERR_CTP_INVALID_TYPE: () => new UnsupportedMediaTypeError()
}

function toResponse (error: FastifyError, development: boolean): { status: number, body: ErrorBody } {
  if (error.validation !== undefined) {
    // SPEC 7.2: an id that is not a positive integer has a sentence of its own; any other path
    // parameter (a city) fails as a field does.
    if (error.validationContext === 'params' && failedParam(error.validation) === 'id') return toResponse(new InvalidIdError('id'), development)
    return { status: 400, body: { error: 'Validation failed', details: validationDetails(error.validation) } }
  }
  const mapped = error.code === undefined ? undefined : FASTIFY_ERRORS[error.code]
  if (mapped !== undefined) return toResponse(mapped(), development)

  const status = error.statusCode ?? 500
  // An expected 503 has no stack to show: it is an answer, not a fault.
  const stack = development && status >= 500 && !isExpectedUnavailable(error) ? { stack: error.stack ?? '' } : {}
  // Our own errors keep their status and message, including a mirrored upstream status (SPEC 4.8).
  if (isPublicError(error)) return { status, body: { error: error.message, ...stack } }
  // Any other client error Fastify raises: its status with the standard reason, never its message.
  if (status >= 400 && status < 500) return { status, body: { error: STATUS_CODES[status] ?? 'Bad Request' } }
  // Everything else is unexpected (SPEC 7.4): detail only in development.
  return development
    ? { status: 500, body: { error: error.message, stack: error.stack ?? '' } }
    : { status: 500, body: { error: 'Internal server error' } }
}

/**
 * A failure of the server is logged in full (stack included) at error; only the mapped body leaves
 * the process. What the caller caused, or an expected 503, is a debug line without a stack: the one
 * info line per request comes from plugins/request-log.ts.
 */
function logFailure (error: FastifyError, status: number, log: FastifyBaseLogger): void {
  // Shed requests are counted into load-shedding's summary line instead: one line a second, not one each.
  if (error.code === LOAD_SHED_CODE) return
  if (status >= 500 && !isExpectedUnavailable(error)) log.error({ err: error }, 'request failed')
  // Not under `err`: pino's error serializer would add an empty stack and a type to the two fields.
  else log.debug({ code: error.code, reason: error.message, statusCode: status }, 'request rejected')
}

/** The one error handler; also used for the errors Fastify raises before routing (frameworkErrors). */
// A promotion takes seconds, and a place for an expensive read frees within about one (CONTRACT 16);
// a request that meets its Idempotency-Key's first one still running may retry in one (CONTRACT 12);
// a live slot refused (CONTRACT 13) and a draining instance are the same: the client is told to come
// back after one.
const RETRY_AFTER_SECONDS = '1'
const RETRY_LATER = new Set([
  PRIMARY_UNAVAILABLE_CODE, HEAVY_READS_FULL_CODE, IDEMPOTENCY_KEY_IN_PROGRESS_CODE, LIVE_FULL_CODE, LIVE_CLIENT_LIMIT_CODE, DRAINING_CODE
])
const READS = new Set(['GET', 'HEAD', 'OPTIONS'])

/**
 * A write the database could not take because no writable primary answers (CONTRACT 14: a failover
 * in progress) is refused like an overload, 503 with Retry-After, never a 500. Reads keep SPEC's
 * answer to a database failure.
 */
function primaryUnavailable (error: FastifyError, method: string): FastifyError {
  // Our own errors (an identity provider out of reach, too) already say what happened.
  if (isPublicError(error)) return error
  return !READS.has(method) && isWriteRefused(error) ? new PrimaryUnavailableError({ cause: error }) : error
}

export function createErrorHandler (development: boolean) {
  return function errorHandler (raised: FastifyError, request: FastifyRequest, reply: FastifyReply) {
    const error = primaryUnavailable(raised, request.method)
    const { status, body } = toResponse(error, development)
    logFailure(error, status, request.log)
    if (RETRY_LATER.has(error.code)) reply.header('retry-after', RETRY_AFTER_SECONDS)
    // An error is never stored or revalidated (CONTRACT 12), whatever the route would send on success.
    return reply.code(status).header('cache-control', 'no-store').removeHeader('etag').send(body)
  }
}

/**
 * Errors Node's HTTP parser raises before Fastify sees a request: a malformed request line or header,
 * bad framing, a header block over the size limit, a client too slow to send its request. Same
 * `{ error }` shape as every other failure (Fastify's default adds `message` and `statusCode`), then
 * the connection is closed, since the rest of its bytes cannot be trusted.
 */
export function clientErrorHandler (this: { log: FastifyBaseLogger }, error: ConnectionError, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  const status = error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400
  const reason = STATUS_CODES[status] ?? 'Bad Request'
  const body = JSON.stringify({ error: reason })
  this.log.debug({ code: error.code, reason: error.message, statusCode: status }, 'client error')
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`)
  }
  socket.destroy()
}

export default fp<ErrorsPluginOptions>(async function errors (app, opts) {
  app.setErrorHandler(createErrorHandler(opts.development))

  app.setNotFoundHandler(function () {
    throw new RouteNotFoundError()
  })

  // An Expect header other than 100-continue: Node answers 417 itself, with an empty body, unless
  // someone listens. Same answer, in the one error shape.
  app.server.on('checkExpectation', function (_req: IncomingMessage, res: ServerResponse) {
    const body = JSON.stringify({ error: STATUS_CODES[417] })
    res.writeHead(417, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
    res.end(body)
  })
}, { name: 'errors', fastify: '5.x' })
