import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { inBatches } from '../db/batches.js'
import { statement } from '../db/statement.js'
import { IdempotencyKeyInProgressError, IdempotencyKeyReusedError } from '../errors.js'
import type { StoredCreated } from './write.js'

export interface IdempotentRequest {
  subjectId: string
  key: string
  /** requestFingerprint of the body. */
  fingerprint: string
}

export interface IdempotentResponse extends StoredCreated {
  /** True when this is the stored answer to an earlier request. */
  replayed: boolean
}

const PRUNE_BATCH = 10_000
const PRUNE_MAX_BATCHES = 100

const find = statement<StoredCreated & { fingerprint: string }>('idempotency_find', sql`
  SELECT fingerprint, status, location, body FROM idempotency_keys
  WHERE subject_id = ${sql.placeholder('subjectId')}::text AND key = ${sql.placeholder('key')}::text
    AND created_at > now() - ${sql.placeholder('ttlHours')}::float8 * interval '1 hour'`)

// Oldest first through the created_at index, a bounded batch at a time; rows a writer has locked
// are skipped (taken over by now, or pruned next time), so pruning never waits for a request.
const prune = statement<{ n: number }>('idempotency_prune', sql`
  WITH doomed AS (
    SELECT subject_id, key FROM idempotency_keys
    WHERE created_at <= now() - ${sql.placeholder('ttlHours')}::float8 * interval '1 hour'
    ORDER BY created_at LIMIT ${sql.placeholder('limit')}::int FOR UPDATE SKIP LOCKED),
  gone AS (
    DELETE FROM idempotency_keys k USING doomed d WHERE k.subject_id = d.subject_id AND k.key = d.key RETURNING 1)
  SELECT count(*)::float8 AS n FROM gone`)

export interface IdempotencyOptions {
  /** IDEMPOTENCY_TTL_HOURS: keys are kept at least this long, and treated as absent after it. */
  ttlHours: number
}

/**
 * Idempotent creation (CONTRACT 12). The stored 201s live in PostgreSQL, written by the statement that
 * inserts their resource (storeCreatedSql in ./write.ts); this instance also knows which keys its own
 * requests are running under. A create under a key: `begin`, the write, `replay` when the write found
 * the key taken, and `end` whatever happened.
 */
export function createIdempotencyRepository (db: Database, options: IdempotencyOptions) {
  const running = new Set<string>()
  const flightOf = (request: IdempotentRequest): string => JSON.stringify([request.subjectId, request.key])

  return {
    /**
     * Marks (subject, key) as running here until `end`: a second request under it meanwhile gets 409.
     * One that races a request on another instance finds the key taken once that request committed.
     */
    begin (request: IdempotentRequest): void {
      const flight = flightOf(request)
      if (running.has(flight)) throw new IdempotencyKeyInProgressError()
      running.add(flight)
    },

    end (request: IdempotentRequest): void {
      running.delete(flightOf(request))
    },

    /**
     * The answer to a request whose write found its key held by a committed request: that request's
     * 201, the same bytes, if the body is the same JSON value; 422 if not.
     */
    async replay (request: IdempotentRequest): Promise<IdempotentResponse> {
      const [previous] = await find(db, { subjectId: request.subjectId, key: request.key, ttlHours: options.ttlHours })
      // Held a moment ago but gone now (aged out and pruned in between): the client may simply retry.
      if (previous === undefined) throw new IdempotencyKeyInProgressError()
      if (previous.fingerprint !== request.fingerprint) throw new IdempotencyKeyReusedError()
      return { status: previous.status, location: previous.location, body: previous.body, replayed: true }
    },

    /** Deletes keys older than the TTL, batch by batch (each its own short transaction); returns how many went. */
    prune (): Promise<number> {
      return inBatches(async (limit) => (await prune(db, { ttlHours: options.ttlHours, limit }))[0]?.n ?? 0, PRUNE_BATCH, PRUNE_MAX_BATCHES)
    }
  }
}

export type IdempotencyRepository = ReturnType<typeof createIdempotencyRepository>
