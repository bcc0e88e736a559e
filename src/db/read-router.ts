import type { Database } from './client.js'

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

// SQLSTATE classes and driver codes that say "this server cannot serve queries now" rather than
// "this query is wrong": connection exceptions, shutdowns, startup, too many connections.
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE',
  'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT',
  '57P01', '57P02', '57P03', '53300',
  // No writable primary answers (src/db/failover/elector.ts).
  'API_PRIMARY_UNAVAILABLE'
])

/** Whether an error, or one of its causes (Drizzle wraps driver errors), has a code `matches` accepts. */
function hasCode (err: unknown, matches: (code: string) => boolean): boolean {
  for (let e = err, depth = 0; e !== null && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string' && matches(code)) return true
  }
  return false
}

/** True when an error (or one of its causes, as Drizzle wraps driver errors) means the server is unreachable. */
export function isUnreachable (err: unknown): boolean {
  return hasCode(err, (code) => UNREACHABLE_CODES.has(code) || code.startsWith('08'))
}

/**
 * True when a write could not be taken because no writable primary answers: the server is out of
 * reach, or the one reached has just become a standby (25006, read-only transaction).
 */
export function isWriteRefused (err: unknown): boolean {
  return isUnreachable(err) || hasCode(err, (code) => code === '25006')
}

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
      const down = isUnreachable(err)
      if (down) downUntil[index] = now() + backoffMs
      options.onReplicaError?.({ replica: index, down, err })
      return run(primary)
    }
  }
}
