import { isPublicError } from '../errors.js'
import type { Database } from './client.js'
import { isUnreachable } from './driver-errors.js'

/**
 * The database one read runs on (CONTRACT 11): a replica in turn, or the primary when none is
 * configured or usable. A repository reads on `db` and, when that read fails, reads once more on
 * `fallback(err)`; writes never pick a handle.
 */
export interface ReadHandle {
  readonly db: Database
  /**
   * The database to read again on after a read on `db` failed with `err`: the primary. Rethrows `err`
   * when `db` is the primary already, or when `err` is an answer of the service's own.
   */
  fallback: (err: unknown) => Database
}

/** Picks the database of each read. */
export interface ReadHandles {
  pick: () => ReadHandle
}

export interface ReadRouterOptions {
  /** How long a replica that could not be reached is left out before it is tried again. */
  backoffMs?: number
  /** Told when a read failed on a replica and went to the primary instead. */
  onReplicaError?: (event: { replica: number, down: boolean, err: unknown }) => void
  /** Whether a replica may be read from now (one on another history may not: CONTRACT 14). */
  usable?: (replica: number) => boolean
  now?: () => number
}

export const REPLICA_BACKOFF_MS = 5_000

function rethrow (err: unknown): never {
  throw err
}

/** Every read on the primary: the handles when no replica is configured. */
export function primaryOnly (primary: Database): ReadHandles {
  const handle: ReadHandle = { db: primary, fallback: rethrow }
  return { pick: () => handle }
}

/**
 * Round robin over the replicas. A read that fails on a replica runs again on the primary, so a
 * dead or lagging-into-conflict replica never fails a read; a replica that cannot be reached is
 * left out for `backoffMs`, so requests do not each pay for its timeout. Only a failure on the
 * primary reaches the caller.
 */
export function createReadRouter (primary: Database, replicas: readonly Database[], options: ReadRouterOptions = {}): ReadHandles {
  if (replicas.length === 0) return primaryOnly(primary)
  const onPrimary = primaryOnly(primary).pick()
  const backoffMs = options.backoffMs ?? REPLICA_BACKOFF_MS
  const now = options.now ?? Date.now
  const usable = options.usable ?? (() => true)
  const downUntil = replicas.map(() => 0)
  let next = 0

  function pickReplica (): number | undefined {
    const at = now()
    for (let tried = 0; tried < replicas.length; tried++) {
      const index = next
      next = (next + 1) % replicas.length
      if ((downUntil[index] ?? 0) <= at && usable(index)) return index
    }
    return undefined
  }

  function onReplica (index: number, replica: Database): ReadHandle {
    return {
      db: replica,
      fallback (err) {
        // An answer of the service's own (an invalid cursor, expensive reads full, a client gone) is the
        // read's outcome, not a fault of the replica: the primary would only answer it again.
        if (isPublicError(err as { code?: unknown })) throw err
        const down = isUnreachable(err)
        if (down) downUntil[index] = now() + backoffMs
        options.onReplicaError?.({ replica: index, down, err })
        return primary
      }
    }
  }

  return {
    pick () {
      const index = pickReplica()
      const replica = index === undefined ? undefined : replicas[index]
      return index === undefined || replica === undefined ? onPrimary : onReplica(index, replica)
    }
  }
}
