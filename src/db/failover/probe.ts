import postgres from 'postgres'
import { PgDialect } from 'drizzle-orm/pg-core'
import { sql } from 'drizzle-orm'
import { isSessionEnded } from '../driver-errors.js'
import { POSITION_SQL, TIMELINE_SQL, parseTimelineHistory } from './history.js'

/** What a probe tells of one server. */
export interface ServerState {
  /** In recovery: a standby, read only. */
  standby: boolean
  system: string
  timeline: number
  lsn: bigint
}

const PROBE_TIMEOUT_MS = 2_000
const probeText = new PgDialect().sqlToQuery(sql`SELECT pg_is_in_recovery() AS standby,
  (SELECT system_identifier::text FROM pg_control_system()) AS system,
  ${TIMELINE_SQL} AS timeline, ${POSITION_SQL}::text AS lsn`).sql

/** The name of a timeline's history file in pg_wal: its number as eight hex digits. */
const historyFile = (timeline: number): string => `pg_wal/${timeline.toString(16).toUpperCase().padStart(8, '0')}.history`

/** How often `within` looks at the clock. */
const WITHIN_STEP_MS = 100

/**
 * `promise`, or a timeout after `ms` of time in which the event loop turned. A loop blocked for
 * seconds (a long synchronous task, a pause) cannot tell a live server from a dead one: the question
 * may not even be written yet (postgres.js writes from a setImmediate), and an answer that arrived
 * meanwhile waits behind the loop's timers. So a look at the clock that comes late counts as two
 * steps at most, and the timeout is decided after the loop's next look at its sockets (setImmediate
 * runs after the poll phase).
 */
export async function within<T> (promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([promise, new Promise<never>((_resolve, reject) => {
      let waited = 0
      let last = performance.now()
      const look = (): void => {
        const now = performance.now()
        waited += Math.min(now - last, 2 * WITHIN_STEP_MS)
        last = now
        if (waited >= ms) setImmediate(() => { reject(new Error('probe timed out')) })
        else timer = setTimeout(look, Math.min(WITHIN_STEP_MS, ms - waited))
      }
      timer = setTimeout(look, Math.min(WITHIN_STEP_MS, ms))
    })])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * One connection to one server, kept open and asked what it is now and then. A server that does not
 * answer within two seconds counts as down: a probe never waits on a dead host for longer.
 */
export class ServerProbe {
  readonly #sql: postgres.Sql

  constructor (url: string) {
    this.#sql = postgres(url, {
      max: 1,
      connect_timeout: PROBE_TIMEOUT_MS / 1000,
      // A server that went away is asked again at the next probe, not 20 s later.
      backoff: () => 0.2,
      idle_timeout: 0,
      fetch_types: false,
      onnotice: () => {},
      connection: { application_name: 'messages-api-probe', statement_timeout: PROBE_TIMEOUT_MS }
    })
  }

  /** The server's state, or undefined when it cannot be reached. */
  async read (): Promise<ServerState | undefined> {
    const once = async (): Promise<ServerState | undefined> => {
      const [row] = await within(this.#sql.unsafe<Array<{ standby: boolean, system: string, timeline: number, lsn: string }>>(probeText), PROBE_TIMEOUT_MS)
      if (row === undefined) return undefined
      return { standby: row.standby, system: row.system, timeline: Number(row.timeline), lsn: BigInt(row.lsn) }
    }
    try {
      return await once()
    } catch (err) {
      // postgres.js rejects the first query after a reconnect with the error that ended the previous
      // session (see src/db/client.ts): a server back from a restart answers the second.
      if (!isSessionEnded(err)) return undefined
      return await once().catch(() => undefined)
    }
  }

  /**
   * Where each earlier timeline of `timeline` ended, from its history file; undefined when the role
   * may not read it (pg_read_file needs pg_read_server_files or an EXECUTE grant).
   */
  async switchpoints (timeline: number): Promise<Map<number, bigint> | undefined> {
    if (timeline <= 1) return new Map()
    try {
      const [row] = await within(this.#sql<Array<{ text: string }>>`SELECT pg_read_file(${historyFile(timeline)}) AS text`, PROBE_TIMEOUT_MS)
      return row === undefined ? undefined : parseTimelineHistory(row.text)
    } catch {
      return undefined
    }
  }

  async close (): Promise<void> {
    await this.#sql.end({ timeout: 1 })
  }
}
