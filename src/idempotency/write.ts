import { sql, type SQL } from 'drizzle-orm'

// What a create under an Idempotency-Key writes beside its resource, in the same transaction (CONTRACT 12).

/** An Idempotency-Key (CONTRACT 12) a create is written under, with its request's fingerprint. */
export interface IdempotentWrite {
  key: string
  fingerprint: string
}

/** The 201 stored with a key, exactly as it is sent. */
export interface StoredCreated {
  status: number
  location: string
  body: string
}

/**
 * A create under a key: written (with its stored 201), refused because the key is already held by a
 * committed request, or not written because the subject has no local user yet.
 */
export type KeyedOutcome = { created: StoredCreated } | 'taken' | null

/** The creates whose 201s a statement stores: rows of `from` (aliased `p`) and how each one's 201 reads. */
export interface CreatedRows {
  /** The rows, aliased `p`: subject_id, key (null for a create without one), fingerprint, id (of the resource), created_at. */
  from: SQL
  /** The 201's Location and body of row `p`, as SQL text. */
  location: SQL
  body: SQL
  /** IDEMPOTENCY_TTL_HOURS: a stored key older than this is taken over. */
  ttlHours: SQL
}

/**
 * The insert of the 201s of a statement's keyed creates into idempotency_keys, for a CTE of the
 * statement that creates their resources: both are committed together or not at all, in one round
 * trip. A key already held by a live row (another request committed it; a concurrent one is waited for
 * by ON CONFLICT) stores nothing, and returns no row; a row older than the TTL counts as absent and is
 * taken over. Keys are inserted in key order, so two statements holding the same keys lock them in the
 * same order. Returns message_id, body and location of each key stored.
 */
export function storeCreatedSql (rows: CreatedRows): SQL {
  return sql`INSERT INTO idempotency_keys AS k (subject_id, key, fingerprint, status, location, body, message_id, created_at)
    SELECT p.subject_id, p.key, p.fingerprint, 201, ${rows.location}, ${rows.body}, p.id, p.created_at
    FROM ${rows.from} WHERE p.key IS NOT NULL ORDER BY p.subject_id, p.key
    ON CONFLICT (subject_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = excluded.status,
      location = excluded.location, body = excluded.body, message_id = excluded.message_id, created_at = excluded.created_at
      WHERE k.created_at <= now() - ${rows.ttlHours}::float8 * interval '1 hour'
    RETURNING k.message_id, k.body, k.location`
}
