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
