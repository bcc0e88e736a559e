import type { FastifyReply, FastifyRequest } from 'fastify'
import { IdempotencyKeyInProgressError, UnauthorizedError } from '../errors.js'
import { sendJson } from '../http-cache/representation.js'
import type { IdempotentWrite, KeyedOutcome } from './write.js'
import { parseIdempotencyKey, requestFingerprint } from './key.js'
import type { IdempotencyRepository } from './repository.js'

/** How a POST creates its resource, with and without an Idempotency-Key. */
export interface Creation<T> {
  /** Creates without a key: the resource, serialized by the route's 201 schema. */
  create: () => Promise<T>
  /** The Location of what `create` made. */
  location: (created: T) => string
  /**
   * Creates under a key, storing the 201 (status, Location, body) in the same transaction as the
   * resource; 'taken' when a committed request already holds the key.
   */
  createKeyed: (write: IdempotentWrite) => Promise<Exclude<KeyedOutcome, null>>
}

/**
 * Idempotent creation (CONTRACT 12) for a route that creates as the caller. Without the header, the
 * request is an ordinary create. With a key, the first request creates and is answered from the 201
 * stored with it; any later one with the same key is that stored 201 again, byte for byte, with
 * `Idempotent-Replayed: true`: 422 if its body is another JSON value, 409 with `Retry-After: 1` while
 * the first one runs. A malformed key is 400.
 */
export function createIdempotentCreator (idempotency: IdempotencyRepository) {
  return async function createIdempotently<T> (request: FastifyRequest, reply: FastifyReply, creation: Creation<T>): Promise<FastifyReply> {
    const key = parseIdempotencyKey(request.headers['idempotency-key'])
    if (key === undefined) {
      const created = await creation.create()
      return reply.code(201).header('location', creation.location(created)).send(created)
    }
    // Keys belong to the caller: two callers may use the same key independently.
    if (request.user === null) throw new UnauthorizedError()
    const write = { key, fingerprint: requestFingerprint(request.body) }
    let response
    try {
      response = await idempotency.once({ subjectId: request.user.sub, ...write }, () => creation.createKeyed(write))
    } catch (err) {
      // A request that meets its key's first one still running may retry in a second.
      if (err instanceof IdempotencyKeyInProgressError) reply.header('retry-after', '1')
      throw err
    }
    if (response.replayed) reply.header('idempotent-replayed', 'true')
    return sendJson(reply.code(response.status).header('location', response.location), response.body)
  }
}
