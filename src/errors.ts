import createError from '@fastify/error'

// Every error the API answers with, defined once. The API_ prefix marks a message as public:
// the error handler sends it verbatim. Any other error becomes "Internal server error".
export const UnauthorizedError = createError('API_UNAUTHORIZED', 'Invalid or missing token', 401)
export const ForbiddenError = createError('API_FORBIDDEN', 'Insufficient permissions', 403)
export const NotFoundError = createError('API_NOT_FOUND', '%s not found', 404)
export const RouteNotFoundError = createError('API_ROUTE_NOT_FOUND', 'Not found', 404)
export const ConflictError = createError('API_CONFLICT', '%s', 409)
export const InvalidIdError = createError('API_INVALID_ID', 'Parameter "%s" must be a positive integer', 400)
export const MissingQueryError = createError('API_MISSING_QUERY', 'Missing required query parameter: %s', 400)
export const InvalidIdempotencyKeyError = createError('API_INVALID_IDEMPOTENCY_KEY', 'Invalid Idempotency-Key header', 400)
export const IDEMPOTENCY_KEY_IN_PROGRESS_CODE = 'API_IDEMPOTENCY_KEY_IN_PROGRESS'
export const IdempotencyKeyInProgressError = createError(IDEMPOTENCY_KEY_IN_PROGRESS_CODE, 'A request with this Idempotency-Key is in progress', 409)
export const IdempotencyKeyReusedError = createError('API_IDEMPOTENCY_KEY_REUSED', 'Idempotency-Key was used with a different request', 422)
export const InvalidCursorError = createError('API_INVALID_CURSOR', 'Invalid cursor', 400)
export const InvalidSyncTokenError = createError('API_INVALID_SYNC_TOKEN', 'Invalid sync token', 400)
export const SyncTokenExpiredError = createError('API_SYNC_TOKEN_EXPIRED', 'Sync token expired', 410)
export const MalformedJsonError = createError('API_MALFORMED_JSON', 'Malformed JSON body', 400)
export const BodyTooLargeError = createError('API_BODY_TOO_LARGE', 'Request body too large', 413)
export const UnsupportedMediaTypeError = createError('API_UNSUPPORTED_MEDIA_TYPE', 'Unsupported media type', 415)
export const TooManyRequestsError = createError('API_TOO_MANY_REQUESTS', 'Too many requests', 429)
/** A client holds its share of this instance's live slots (LIVE_MAX_PER_CLIENT, CONTRACT 13). */
export const LIVE_CLIENT_LIMIT_CODE = 'API_LIVE_CLIENT_LIMIT'
export const LiveClientLimitError = createError(LIVE_CLIENT_LIMIT_CODE, 'Too many requests', 429, Error, false)
export const RetrieveFailedError = createError('API_RETRIEVE_FAILED', 'Failed to retrieve %s', 500)
export const NotConfiguredError = createError('API_NOT_CONFIGURED', '%s is not configured', 500)
export const IdentityProviderError = createError('API_IDP_UNREACHABLE', 'Failed to reach identity provider', 502)
export const WeatherUnreachableError = createError('API_WEATHER_UNREACHABLE', 'Failed to reach weather service', 502)
export const DatabaseUnavailableError = createError('API_DATABASE_UNAVAILABLE', 'Database unavailable', 503)
// Expected 503s: the service refusing work by design (overload, shutdown), not a fault. No stack is
// captured (there is nothing to trace, and shedding creates thousands a second) and the error
// handler does not log them as errors.
export const LOAD_SHED_CODE = 'API_LOAD_SHED'
export const DRAINING_CODE = 'API_DRAINING'
export const LIVE_FULL_CODE = 'API_LIVE_FULL'
export const PRIMARY_UNAVAILABLE_CODE = 'API_PRIMARY_UNAVAILABLE'
export const HEAVY_READS_FULL_CODE = 'API_HEAVY_READS_FULL'
export const LoadShedError = createError(LOAD_SHED_CODE, 'Service unavailable', 503, Error, false)
export const DrainingError = createError(DRAINING_CODE, 'Service unavailable', 503, Error, false)
/** Every live slot of this instance is taken (LIVE_MAX_CONNECTIONS, CONTRACT 13). */
export const LiveFullError = createError(LIVE_FULL_CODE, 'Service unavailable', 503, Error, false)
/**
 * No writable database primary answers (CONTRACT 14: between a primary's failure and a standby's
 * promotion). The outage itself is logged once, by src/db/failover/elector.ts, not per request.
 */
export const PrimaryUnavailableError = createError(PRIMARY_UNAVAILABLE_CODE, 'Service unavailable', 503, Error, false)
/**
 * An expensive read (a search, a page the database must walk) found every place it may take, running
 * or waiting, taken, or waited its bounded time for one (CONTRACT 16, src/db/heavy-reads.ts).
 */
export const HeavyReadsFullError = createError(HEAVY_READS_FULL_CODE, 'Service unavailable', 503, Error, false)
/**
 * The client left before its read was answered (its request's signal aborted): nobody receives this,
 * and nothing failed. 499, as proxies log a client that closed its request, so that it is a client's
 * doing in the request log and never an error line.
 */
export const ClientGoneError = createError('API_CLIENT_GONE', 'Client closed request', 499, Error, false)

/** An upstream answered with a non-success status that the API mirrors (SPEC 4.8). */
// Its statusCode is set per instance to the upstream's status, hence the widened type.
export const UpstreamStatusError = createError<'API_UPSTREAM_STATUS', number>('API_UPSTREAM_STATUS', '%s', 502)

/** A 503 answered by design: logged at debug, never as a failure. */
export function isExpectedUnavailable (err: { code?: unknown }): boolean {
  return err.code === LOAD_SHED_CODE || err.code === DRAINING_CODE || err.code === LIVE_FULL_CODE || err.code === PRIMARY_UNAVAILABLE_CODE ||
    err.code === HEAVY_READS_FULL_CODE
}

export function isPublicError (err: { code?: unknown }): boolean {
  return typeof err.code === 'string' && err.code.startsWith('API_')
}

/**
 * A collection read's failure as SPEC 4.9 rule 4 answers it: 500 `Failed to retrieve <collection>`,
 * the driver's error as its cause. What is an answer rather than a failure stays what it is: an
 * invalid cursor (400), an expensive read refused (503) or given up with its client (499).
 */
export function retrieveFailure (collection: string): (err: unknown) => never {
  return (err) => {
    if (err instanceof InvalidCursorError || err instanceof HeavyReadsFullError || err instanceof ClientGoneError) throw err
    throw new RetrieveFailedError(collection, { cause: err })
  }
}
