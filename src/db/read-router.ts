import { isPublicError } from '../errors.js'
import type { Database } from './client.js'
import { isUnreachable } from './driver-errors.js'

/**
 * Runs a read-only query on a database chosen for reads (CONTRACT 11: a replica in turn, the
 * primary when none is configured or the chosen one fails). Writes never go through it.
 */
export type ReadRouter = <T>(run: (db: Database) => Promise<T>) => Promise<T>

/** Every read on the primary: the router when no replica is configured. */
export function primaryOnly (primary: Database): ReadRouter {
  return async (run) => run(primary)
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

/**
 * Round robin over the replicas. A read that fails on a replica runs again on the primary, so a
 * dead or lagging-into-conflict replica never fails a read; a replica that cannot be reached is
 * left out for `backoffMs`, so requests do not each pay for its timeout. Only a failure on the
 * primary reaches the caller.
 */
export function createReadRouter (primary: Database, replicas: readonly Database[], options: ReadRouterOptions = {}): ReadRouter {
  if (replicas.length === 0) return primaryOnly(primary)
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

  return async function read (run) {
    const index = pickReplica()
    const replica = index === undefined ? undefined : replicas[index]
    if (index === undefined || replica === undefined) return run(primary)
    try {
      return await run(replica)
    } catch (err) {
      // An answer of the service's own (an invalid cursor, expensive reads full, a client gone) is the
      // read's outcome, not a fault of the replica: the primary would only answer it again.
      if (isPublicError(err as { code?: unknown })) throw err
      const down = isUnreachable(err)
      if (down) downUntil[index] = now() + backoffMs
      options.onReplicaError?.({ replica: index, down, err })
      return run(primary)
    }
  }
}
