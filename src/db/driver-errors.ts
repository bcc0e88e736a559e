// What a driver error says of the server, shared by everything that talks to PostgreSQL: the read
// router (a replica out of reach), the error handler (a write no primary could take), the pool and
// the failover probes (a session the server ended).

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

/**
 * A session the server ended (SQLSTATE class 57P: administrator command, crash, shutdown, startup).
 * postgres.js 3.4 rejects the first query after a reconnect with such an error although that query
 * was never sent (porsager/postgres#1223): it may be sent once more.
 */
export function isSessionEnded (err: unknown): boolean {
  return /^57P0\d$/.test(String((err as { code?: unknown } | null)?.code))
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
