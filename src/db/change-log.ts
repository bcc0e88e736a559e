import { sql, type SQL } from 'drizzle-orm'

// The change log of drizzle/0010, read by delta sync (src/changes/feed.ts) and by the anchors that
// follow created rows (src/pages/anchors/). Scalar subqueries, so that the planner knows each is one row.

/** A log of the ids every writing transaction wrote, kept in the writing transaction (drizzle/0010). */
export interface ChangeLog {
  /**
   * The ids written by the transactions whose writes snapshot `snap` (a pg_snapshot) does not see, one
   * per entry (an id written twice comes twice), in an order an index reads them in.
   */
  since: (snap: SQL) => SQL
  /** The log's epoch: it changes when the log is emptied (a TRUNCATE). */
  epoch: SQL
  /** Whether every entry `since` needs is still kept (none pruned by retention). */
  intact: (snap: SQL) => SQL
}

/** The log's epoch: a TRUNCATE of messages empties the log and starts a new one. */
export const LOG_EPOCH = sql`(SELECT st.epoch FROM sync_state st)`

/** Retention has deleted the entries below it. */
export const LOG_HORIZON = sql`(SELECT st.horizon FROM sync_state st)`

/**
 * The messages' log as a collection reads it. An entry is written in the writing transaction, so an
 * entry a snapshot does not see is one whose write it does not see; entries below the snapshot's xmin
 * are of transactions it sees ended. Newest first, as its primary key reads them: unordered, the
 * planner (with no statistics of xid8) scanned the whole table.
 */
export const MESSAGE_CHANGE_LOG: ChangeLog = {
  since: (snap) => sql`SELECT c.id FROM message_changes c WHERE c.xid >= pg_snapshot_xmin(${snap}) AND NOT pg_visible_in_snapshot(c.xid, ${snap})
    ORDER BY c.xid DESC`,
  epoch: LOG_EPOCH,
  intact: (snap) => sql`(${LOG_HORIZON} <= pg_snapshot_xmin(${snap}))`
}
