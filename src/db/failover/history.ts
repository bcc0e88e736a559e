import { sql } from 'drizzle-orm'

// Which history a piece of state was read from (CONTRACT 14). PostgreSQL numbers its histories:
// a promoted standby starts a new timeline, branching off its old one at the last WAL position it
// had (the switchpoint). A position in the database's history is a timeline and a WAL position.
// With asynchronous replication the old primary may have committed past the switchpoint: table
// versions, transaction ids and WAL positions then come back on the new timeline with other rows
// under the same numbers. Everything the service keeps is therefore tied to a timeline: table
// versions carry it in their high bits (src/db/counters.ts), sync tokens carry it with the WAL
// position of the answer they came with (src/changes/token.ts).

/**
 * The timeline of the server answering, read in the statement itself. A primary names it in its
 * WAL file names. A standby reports the timeline it receives (pg_stat_wal_receiver, visible with
 * pg_read_all_stats) or else its last restartpoint's, which may be older: such a replica is then
 * taken for one on another history and not read from, which is safe.
 */
export const TIMELINE_SQL = sql.raw(`(CASE WHEN pg_is_in_recovery()
  THEN coalesce((SELECT received_tli FROM pg_stat_wal_receiver), (SELECT timeline_id FROM pg_control_checkpoint()))
  ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END)`)

/**
 * A WAL position at or past every commit the statement's snapshot sees, as a decimal number: on a
 * primary what is flushed (a commit is flushed before it becomes visible), on a standby what is replayed.
 */
export const POSITION_SQL = sql.raw('((CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_flush_lsn() END) - \'0/0\')')

/** Table versions are counts below 2^40 (a trillion row writes); the timeline is the bits above. */
export const TIMELINE_UNIT = 2 ** 40
export const VERSION_TIMELINE_SQL = sql`(${TIMELINE_SQL}::bigint * ${sql.raw(String(TIMELINE_UNIT))})`

/** The timeline a table version was read on. */
export const timelineOfVersion = (version: number): number => Math.floor(version / TIMELINE_UNIT)

export interface History {
  /** pg_control_system().system_identifier: the cluster; a promoted standby keeps its primary's. */
  system: string
  timeline: number
  /**
   * Where each earlier timeline of this one's ancestry ended (from its timeline history file), or
   * undefined when it could not be read (the role may not read files): positions on earlier
   * timelines are then not known to be in this history.
   */
  switchpoints: ReadonlyMap<number, bigint> | undefined
}

/** An earlier timeline's history file: `parent<TAB>X/Y<TAB>reason` per line. */
export function parseTimelineHistory (text: string): Map<number, bigint> {
  const points = new Map<number, bigint>()
  for (const line of text.split('\n')) {
    const match = /^\s*(\d+)\s+([0-9A-Fa-f]+)\/([0-9A-Fa-f]+)/.exec(line)
    if (match === null) continue
    points.set(Number(match[1]), (BigInt(`0x${match[2] ?? '0'}`) << 32n) + BigInt(`0x${match[3] ?? '0'}`))
  }
  return points
}

/**
 * Whether `history` holds the position (`timeline`, `lsn`): on its own timeline every position is
 * its own; on an earlier one, only up to where that timeline ended. A later timeline, or an earlier
 * one whose end is unknown, is not held.
 */
export function holds (history: History, timeline: number, lsn: bigint): boolean {
  if (timeline === history.timeline) return true
  if (timeline > history.timeline) return false
  const end = history.switchpoints?.get(timeline)
  return end !== undefined && lsn <= end
}
