import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import type { ReadHandles } from '../db/read-router.js'
import { inBatches } from '../db/batches.js'
import { rawStatement, statement, type RawRow } from '../db/statement.js'
import { InvalidSyncTokenError, PrimaryUnavailableError, SyncTokenExpiredError } from '../errors.js'
import type { HistorySource } from '../db/failover/elector.js'
import { holds, POSITION_SQL, TIMELINE_SQL } from '../db/failover/history.js'
import { sharedRead, sharedReadByKey } from '../db/shared-read.js'
import { decodeSyncToken, encodeSyncToken, positionKey, type ChangesPosition, type HistoryPoint, type SyncPosition, type SyncToken } from './token.js'
import { LOG_EPOCH, LOG_HORIZON } from '../db/change-log.js'
import { MESSAGE_SOURCE, messageJsonSql } from '../messages/row.js'

// Delta sync (CONTRACT 12) over the change log of drizzle/0010.
//
// Why it is exact. Triggers log, in the writing transaction, the ids every statement writes, under the
// transaction's id (xid8). An answer reads the log only below the xmin of its own snapshot: the oldest
// transaction still running. Every transaction below it has ended, so its entries are all visible now
// (committed) or never will be (rolled back); none can appear later below a point the client has
// passed. Ordering by the moment of writing would lose exactly that: a sequence value or timestamp
// taken in a transaction that commits after a later one. Entries at or above xmin wait for the next
// call, so a transaction left open holds the feed back at its id, and loses nothing. Content is read
// in the same statement, from the same snapshot: an upsert carries the row as it is at the answer,
// and every change that answer does not show was written by a transaction at or above its xmin,
// which is where the client's `next` stands.

/**
 * What an answer is checked against and positioned by, rendered by its statement's first row: with
 * the timeline and WAL position it was read at (CONTRACT 14), which its token carries.
 */
interface PageState {
  xmin: string
  epoch: string
  horizon: string
  tli: number
  lsn: string
}

/** The state of the log as a poll (or the live watcher) first reads it: PageState and the newest logged transaction. */
export interface ChangesHead extends PageState {
  newest: string | null
}

/** An answer of GET /v2/messages/changes: its body, serialized, and what it says, for live delivery. */
export interface ChangesAnswer {
  body: Buffer
  /** The body's `next`. */
  token: string
  epoch: string
  /** Where in the database's history it was read. */
  point: HistoryPoint
  next: SyncPosition
  hasMore: boolean
  /** `data` is []. */
  empty: boolean
}

/** Where a stream starts: a position a token stood for and where it was read, or (both undefined) the initial copy's start. */
export interface FeedStart {
  epoch: string | undefined
  position: SyncPosition | undefined
  point: HistoryPoint
}

/** What a head read says of a position: its token expired, an answer must be read, or none can be (yet). */
export type HeadVerdict = { kind: 'expired' } | { kind: 'read' } | { kind: 'none', next: ChangesPosition }

// The state every answer is checked against and positioned by: the snapshot's xmin, the epoch and
// the pruned horizon. Scalar subqueries, so the planner knows it is one row: as a scan of sync_state,
// never analyzed, it expected many rows and priced pages so high that JIT compiled each
// (docs/performance.md#delta-sync-pages).
const STATE = sql`SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin, ${LOG_EPOCH} AS epoch, ${LOG_HORIZON} AS horizon,
  ${TIMELINE_SQL} AS tli, ${POSITION_SQL}::text AS lsn`
const STATE_JSON = sql`'xmin', s.xmin::text, 'epoch', s.epoch::text, 'horizon', s.horizon::text, 'tli', s.tli, 'lsn', s.lsn`

// Pages are rendered by the database, one row per entry, each message the same JSON as
// GET /v2/messages/{id} (messageJsonSql, which also renders stored 201s), and read as bytes
// (rawStatement): the service joins them with commas and never decodes them. The database has a core
// of its own while the event loop serves pages. Rendering 1,000 rows in JavaScript made the event loop
// the bottleneck of an initial copy; one text per page made the database aggregate (string_agg, dearer
// than the rows) and the service decode and encode it again; rows as bytes do neither
// (docs/performance.md#delta-sync-pages).
//
// Every statement answers rows (k, state, entry) ordered by k: first k = 0 with the state as JSON,
// then one row per entry, k its message id.
const UPSERT = sql`'{"op":"upsert","id":' || r.id::text || ',"message":' || ${messageJsonSql('r')} || '}'`
const MESSAGE_ROW = sql`SELECT m.id, m.content, m.subject, m.priority, m.author_id, u.name AS author_name, m.created_at FROM ${MESSAGE_SOURCE}`

// An answer holds at most `limit` entries and about ANSWER_MAX_BYTES: `limit` is a maximum, and
// `hasMore` says more follow. Without it one answer of 1,000 messages of 4,000 three-byte characters
// is 12 MB, which a phone on a slow link takes minutes to receive and a stream must hold while it does
// (CONTRACT 13). Sizes are read from the stored lengths (octet_length reads a TOASTed value's header,
// not the value), so a row past the cut is never rendered; its JSON adds about ENTRY_OVERHEAD_BYTES.
// The first entry is always sent, whatever its size, so every answer moves the client on.
export const ANSWER_MAX_BYTES = 1_048_576
const ENTRY_OVERHEAD_BYTES = 200
const ENTRY_SIZE = (p: string) => sql.raw(`octet_length(${p}.content) + coalesce(octet_length(${p}.subject), 0) + ${ENTRY_OVERHEAD_BYTES}`)

// The same, with the size of the entry it makes (ENTRY_SIZE), for the byte cut of the initial copy.
const MESSAGE_ROW_SIZED = sql`SELECT m.id, m.content, m.subject, m.priority, m.author_id, u.name AS author_name, m.created_at, ${ENTRY_SIZE('m')} AS size FROM ${MESSAGE_SOURCE}`

// The initial copy: the next `limit` messages in id order, and one more, which tells that more follow
// and is not sent; rows past the byte cut come back without an entry, and say the same. `logged`
// tells whether any change was logged at or above the copy's watermark: if none was, every row sent
// is still as it was sent. It asks for the newest entry (one step down the index), not for any entry
// above the watermark, which the planner would look for by scanning the whole log. Rows are rendered
// as the index scan reads them, into a merge with the state row: no CTE holds them, which is cheaper
// (docs/performance.md#delta-sync-pages).
const snapshotPage = rawStatement(sql`
  WITH s AS MATERIALIZED (${STATE})
  SELECT 0::bigint AS k, json_build_object(${STATE_JSON},
      'logged', coalesce((SELECT max(c.xid) FROM message_changes c) >= coalesce(${sql.placeholder('watermark')}::text::xid8, s.xmin), false))::text AS state,
      NULL AS entry
    FROM s
  UNION ALL
  (SELECT r.id, NULL, CASE WHEN r.n <= ${sql.placeholder('limit')}::int AND r.before < ${ANSWER_MAX_BYTES} THEN ${UPSERT} END
    FROM (SELECT w.*, row_number() OVER (ORDER BY w.id) AS n, sum(w.size) OVER (ORDER BY w.id) - w.size AS before
      FROM (${MESSAGE_ROW_SIZED} WHERE m.id > ${sql.placeholder('after')}::bigint ORDER BY m.id LIMIT ${sql.placeholder('limit')}::int + 1) w) r)
  ORDER BY k`)

// Changes: the next `limit` log entries after the position, below xmin; each message they name once,
// with its content now, or a delete when it is gone. `last` is the last entry taken, `n` how many
// entries were read (one more than the limit when more follow). Past the byte cut (messages in the
// order of their first entry), the answer ends before the first entry of the first message left
// out: every entry up to there names a message it sends. `cut` says it did.
const changesPage = rawStatement(sql`
  WITH s AS MATERIALIZED (${STATE}),
  log AS MATERIALIZED (
    SELECT c.xid, c.id FROM message_changes c
    WHERE (c.xid, c.id) > (${sql.placeholder('xid')}::text::xid8, ${sql.placeholder('id')}::bigint) AND c.xid < (SELECT xmin FROM s)
    ORDER BY c.xid, c.id LIMIT ${sql.placeholder('limit')}::int + 1),
  taken AS MATERIALIZED (SELECT xid, id, row_number() OVER (ORDER BY xid, id) AS ord FROM log ORDER BY xid, id LIMIT ${sql.placeholder('limit')}::int),
  sized AS MATERIALIZED (
    SELECT w.*, sum(w.size) OVER (ORDER BY w.first) - w.size AS before
    FROM (SELECT f.id AS k, f.first, r.*, coalesce(${ENTRY_SIZE('r')}, ${ENTRY_OVERHEAD_BYTES}) AS size
      FROM (SELECT id, min(ord) AS first FROM taken GROUP BY id) f LEFT JOIN LATERAL (${MESSAGE_ROW} WHERE m.id = f.id) r ON true) w),
  cut AS (SELECT min(first) AS at FROM sized WHERE before >= ${ANSWER_MAX_BYTES}),
  last AS (SELECT xid, id FROM taken WHERE ord < coalesce((SELECT at FROM cut), ${sql.placeholder('limit')}::int + 1) ORDER BY ord DESC LIMIT 1)
  SELECT 0::bigint AS k, json_build_object(${STATE_JSON}, 'n', (SELECT count(*) FROM log), 'cut', (SELECT at FROM cut) IS NOT NULL,
      'lastXid', (SELECT xid::text FROM last), 'lastId', (SELECT id FROM last)::float8)::text AS state, NULL AS entry
    FROM s
  UNION ALL
  SELECT r.k, NULL, CASE WHEN r.id IS NULL THEN '{"op":"delete","id":' || r.k::text || '}' ELSE ${UPSERT} END
    FROM sized r WHERE r.before < ${ANSWER_MAX_BYTES}
  ORDER BY k`)

const DATA_START = Buffer.from('{"data":[')
const COMMA = Buffer.from(',')
const EMPTY: Buffer[] = []

/**
 * A rendered page: its state, parsed, and its first `limit` entries with commas between them, as views
 * of the bytes received; `more` when the statement rendered one beyond them. A page kept for later is
 * joined into one buffer at once (joined): a page read ahead held as its thousands of row views
 * outlives young-generation collections, which then cost more than the copy. One answered now is
 * copied once, into its body.
 */
function page<State extends PageState> (rows: RawRow[], limit: number): { state: State, data: Buffer[], last: number | undefined, more: boolean } {
  const head = rows[0]?.[1]
  if (head == null) throw new Error('sync_state has no row')
  const list: Buffer[] = []
  let count = 0
  // Rows past the limit or the byte cut have no entry; they only say that more follow.
  while (count < limit && count + 1 < rows.length) {
    const entry = rows[count + 1]![2]
    if (entry == null) break
    if (count > 0) list.push(COMMA)
    list.push(entry)
    count++
  }
  const lastKey = count > 0 ? rows[count]![0] : undefined
  return {
    state: JSON.parse(head.toString()) as State,
    data: list,
    last: lastKey == null ? undefined : Number(lastKey.toString()),
    more: rows.length - 1 > count
  }
}

// A poll usually finds nothing: the state and the newest logged transaction, one shared read for
// every poll waiting (sharedRead), answer it without reading the log. The live watcher reads the same.
const headStatement = statement<ChangesHead>('message_changes_head', sql`
  SELECT s.xmin::text AS xmin, s.epoch::text AS epoch, s.horizon::text AS horizon, s.tli, s.lsn,
    (SELECT max(c.xid) FROM message_changes c)::text AS newest
  FROM (${STATE}) s`)
const readHead = sharedRead(async (db): Promise<ChangesHead> => {
  const [row] = await headStatement(db, {})
  if (row === undefined) throw new Error('sync_state has no row')
  return row
})

const prune = statement<{ n: number }>('message_changes_prune', sql`
  SELECT message_changes_prune(${sql.placeholder('hours')}::float8 * interval '1 hour', ${sql.placeholder('batch')}::int)::float8 AS n`)
const PRUNE_BATCH = 10_000
const PRUNE_MAX_BATCHES = 100

export interface ChangeFeedOptions {
  /** SYNC_RETENTION_HOURS: how long the log keeps a change, and so how long a token stays valid. */
  retentionHours: number
  /** The database's history: a token from a part of it the primary no longer has expires. */
  history: HistorySource
}

const later = (a: string, b: string) => BigInt(a) > BigInt(b)

/** How far ahead of this instance's clock another instance's may be. */
const CLOCK_SKEW_MS = 3_600_000

/** A page of the initial copy, rendered. */
interface CopyPage extends PageState { logged: boolean, data: Buffer[], last: number, more: boolean }

// The initial copy is read ahead: a client walking it asks for the next page as soon as it has this
// one, and the database reads the following pages while the client receives and applies this one.
// A page read before its request is still exact: it is read after the copy's watermark was taken. At
// most READ_AHEAD_PAGES pages (of up to 1,000 messages, some 300 KB each) wait, for READ_AHEAD_MS;
// each served page keeps READ_AHEAD_DEPTH pages ahead of the client.
const READ_AHEAD_PAGES = 16
const READ_AHEAD_MS = 10_000
const READ_AHEAD_DEPTH = 2

type ReadPage = (watermark: string, after: number) => Promise<CopyPage>

function createReadAhead () {
  const waiting = new Map<string, { page: Promise<CopyPage | undefined>, at: number }>()

  function start (prefix: string, watermark: string, after: number, read: ReadPage, depth: number): void {
    const key = `${prefix}.${watermark}.${after}`
    if (depth <= 0) return
    // A page already read, or being read, extends the chain from where it ends, so the database
    // always works `depth` pages ahead of the client and never waits for it.
    const known = waiting.get(key)
    if (known !== undefined) {
      known.page.then((found) => { if (found?.more === true) start(prefix, watermark, found.last, read, depth - 1) }).catch(() => {})
      return
    }
    for (const oldest of waiting.keys()) {
      if (waiting.size < READ_AHEAD_PAGES) break
      waiting.delete(oldest)
    }
    // A read ahead that fails is simply not used: the request reads the page itself.
    const page = read(watermark, after).then((found) => {
      if (found.more) start(prefix, watermark, found.last, read, depth - 1)
      return found
    }, () => undefined)
    waiting.set(key, { page, at: Date.now() })
  }

  return {
    /** Reads the pages after `after` in the background; `prefix` names the epoch and the limit. */
    start: (prefix: string, watermark: string, after: number, read: ReadPage) => { start(prefix, watermark, after, read, READ_AHEAD_DEPTH) },
    async take (prefix: string, watermark: string, after: number): Promise<CopyPage | undefined> {
      const key = `${prefix}.${watermark}.${after}`
      const entry = waiting.get(key)
      if (entry === undefined) return undefined
      waiting.delete(key)
      return Date.now() - entry.at > READ_AHEAD_MS ? undefined : entry.page
    }
  }
}

/** Runs a read of the feed on a database picked for reads, and once more on the primary when it fails on a replica (CONTRACT 11). */
async function onReadDb<T> (reads: ReadHandles, read: (target: Database) => Promise<T>): Promise<T> {
  const on = reads.pick()
  try {
    return await read(on.db)
  } catch (err) {
    return await read(on.fallback(err))
  }
}

export function createChangeFeed (db: Database, reads: ReadHandles, options: ChangeFeedOptions) {
  const retentionMs = options.retentionHours * 3_600_000
  const readAhead = createReadAhead()

  const { history } = options

  function answer (epoch: string, point: HistoryPoint, data: Buffer[], next: SyncPosition, hasMore: boolean): ChangesAnswer {
    const token = encodeSyncToken({ epoch, issuedAt: Date.now(), position: next, point })
    const body = Buffer.concat([DATA_START, ...data, Buffer.from(`],"next":"${token}","hasMore":${String(hasMore)}}`)])
    return { body, token, epoch, point, next, hasMore, empty: data.length === 0 }
  }

  const pointOf = (state: { tli: number, lsn: string }): HistoryPoint => ({ timeline: Number(state.tli), lsn: BigInt(state.lsn) })

  /**
   * Whether a server's answer is on the history followed: one read on another timeline (a failover
   * not noticed yet, a replica left behind) is not used. The primary is probed at once; meanwhile
   * the poll answers 503, and a replica's read goes to the primary (src/db/read-router.ts).
   */
  function onHistory (state: { tli: number }): boolean {
    if (Number(state.tli) === history.current()?.timeline) return true
    history.suspect()
    return false
  }

  /** Where a client stands once it has every entry below `xmin`: never behind where it stood. */
  function caughtUp (position: ChangesPosition, xmin: string): ChangesPosition {
    return later(xmin, position.xid) ? { kind: 'changes', xid: xmin, id: 0 } : position
  }

  function checkValid (epoch: string, position: string, state: PageState): void {
    if (!onHistory(state)) throw new PrimaryUnavailableError()
    if (epoch !== state.epoch || later(state.horizon, position)) throw new SyncTokenExpiredError()
  }

  async function readCopy (target: Database, watermark: string | undefined, after: number, limit: number): Promise<CopyPage> {
    const { state, data, last, more } = page<PageState & { logged: boolean }>(await snapshotPage(target, { after, limit, watermark: watermark ?? null }), limit)
    // Read ahead, it may wait a while: joined.
    return { ...state, data: data.length === 0 ? data : [Buffer.concat(data)], last: last ?? after, more }
  }

  async function snapshot (target: Database, epoch: string | undefined, watermark: string | undefined, after: number, limit: number): Promise<ChangesAnswer> {
    // A page read ahead serves only when more follow it: whether the copy is complete, and current,
    // is decided by a read made after the request arrived.
    const early = epoch === undefined || watermark === undefined ? undefined : await readAhead.take(`${epoch}.${limit}`, watermark, after)
    const page = early?.more === true ? early : await readCopy(target, watermark, after, limit)
    if (epoch !== undefined && watermark !== undefined) checkValid(epoch, watermark, page)
    else if (!onHistory(page)) throw new PrimaryUnavailableError()
    // Every page read at a snapshot whose xmin is lower (a replica further behind) lowers the
    // watermark with it: a change it did not show is at or above that xmin.
    const start = watermark === undefined || later(watermark, page.xmin) ? page.xmin : watermark
    if (page.more) {
      readAhead.start(`${page.epoch}.${limit}`, start, page.last, async (watermark, next) => readCopy(target, watermark, next, limit))
      return answer(page.epoch, pointOf(page), page.data, { kind: 'snapshot', watermark: start, after: page.last }, true)
    }
    // The copy is complete. Changes logged since it began are next; with none, the copy is current.
    const changes: ChangesPosition = { kind: 'changes', xid: start, id: 0 }
    return page.logged ? answer(page.epoch, pointOf(page), page.data, changes, true) : answer(page.epoch, pointOf(page), page.data, caughtUp(changes, page.xmin), false)
  }

  /** What the head says of a position: whether the log can hold an answer for it below xmin. */
  function verdict (head: ChangesHead, epoch: string, position: ChangesPosition): HeadVerdict {
    // A head from another history says nothing of this one: the position stands until it is followed.
    if (!onHistory(head)) return { kind: 'none', next: position }
    if (epoch !== head.epoch || later(head.horizon, position.xid)) return { kind: 'expired' }
    // Nothing logged at or after the position: every transaction below xmin has been answered.
    if (head.newest === null || later(position.xid, head.newest)) return { kind: 'none', next: caughtUp(position, head.xmin) }
    // Entries at or after the position, but none below xmin yet: the position stands.
    if (!later(head.xmin, position.xid)) return { kind: 'none', next: position }
    return { kind: 'read' }
  }

  async function changesPageAt (target: Database, epoch: string, position: ChangesPosition, limit: number): Promise<ChangesAnswer> {
    const { state, data } = page<PageState & { n: number, cut: boolean, lastXid: string | null, lastId: number | null }>(await changesPage(target, { xid: position.xid, id: position.id, limit }), limit)
    checkValid(epoch, position.xid, state)
    if ((state.n > limit || state.cut) && state.lastXid !== null && state.lastId !== null) {
      return answer(state.epoch, pointOf(state), data, { kind: 'changes', xid: state.lastXid, id: state.lastId }, true)
    }
    return answer(state.epoch, pointOf(state), data, caughtUp(position, state.xmin), false)
  }

  async function changes (target: Database, epoch: string, position: ChangesPosition, limit: number): Promise<ChangesAnswer> {
    const head = await readHead(target)
    if (!onHistory(head)) throw new PrimaryUnavailableError()
    const found = verdict(head, epoch, position)
    if (found.kind === 'expired') throw new SyncTokenExpiredError()
    if (found.kind === 'none') return answer(epoch, pointOf(head), EMPTY, found.next, false)
    return changesPageAt(target, epoch, position, limit)
  }

  // Clients that poll one position at about the same time share its answer: caught-up clients all
  // stand at the same position, and a write wakes every long-poll held there at once.
  const sharedAnswer = sharedReadByKey<ChangesAnswer>()

  /** The answer at a decoded position: the initial copy from its start when there is none. */
  function answerAt (epoch: string | undefined, position: SyncPosition | undefined, limit: number): Promise<ChangesAnswer> {
    if (epoch === undefined || position === undefined) return sharedAnswer(positionKey(epoch, position, limit), async () => onReadDb(reads, async (target) => snapshot(target, undefined, undefined, 0, limit)))
    return sharedAnswer(positionKey(epoch, position, limit), async () => onReadDb(reads, async (target) => position.kind === 'snapshot'
      ? snapshot(target, epoch, position.watermark, position.after, limit)
      : changes(target, epoch, position, limit)))
  }

  /** A token a client sent back, as far as it can be judged without the log: 400 malformed, 410 too old or from another history. */
  function tokenOf (since: string): SyncToken {
    const token = decodeSyncToken(since)
    const age = Date.now() - token.issuedAt
    // No answer was made in the future: such a token was altered (clocks of instances may differ a little).
    if (age < -CLOCK_SKEW_MS) throw new InvalidSyncTokenError()
    if (age > retentionMs) throw new SyncTokenExpiredError()
    // A token read past where the history followed now branched off: it may have shown rows that are gone.
    const current = history.current()
    if (current === undefined) throw new PrimaryUnavailableError()
    if (!holds(current, token.point.timeline, token.point.lsn)) throw new SyncTokenExpiredError()
    return token
  }

  return {
    /** The answer to GET /v2/messages/changes: 400 for a malformed token, 410 for an expired one. */
    answerFor (since: string | undefined, limit: number): Promise<ChangesAnswer> {
      if (since === undefined) return answerAt(undefined, undefined, limit)
      const token = tokenOf(since)
      return answerAt(token.epoch, token.position, limit)
    },

    /**
     * Where a stream starts, judged as its first answer would judge it but from the head alone (one
     * small read shared by everyone asking at once): 400 for a malformed token, 410 for an expired one
     * (too old, pruned, from before a TRUNCATE or another history), 503 while no primary is known. So
     * these are answered as JSON before the stream begins, without reading an answer it may have no
     * room for yet.
     */
    async startFor (since: string | undefined): Promise<FeedStart> {
      if (since === undefined) {
        const current = history.current()
        if (current === undefined) throw new PrimaryUnavailableError()
        // Nothing read yet: the start of the history followed now.
        return { epoch: undefined, position: undefined, point: { timeline: current.timeline, lsn: 0n } }
      }
      const token = tokenOf(since)
      const { position } = token
      checkValid(token.epoch, position.kind === 'snapshot' ? position.watermark : position.xid, await onReadDb(reads, readHead))
      return { epoch: token.epoch, position, point: token.point }
    },

    answerAt,

    /** The state of the log now, from a database chosen for reads; shared by everyone asking at once. */
    head: (): Promise<ChangesHead> => onReadDb(reads, readHead),

    verdict,

    /** The change entries after a position, read without a head first (the caller has read one). */
    changesAfter: (epoch: string, position: ChangesPosition, limit: number): Promise<ChangesAnswer> =>
      onReadDb(reads, async (target) => changesPageAt(target, epoch, position, limit)),

    /** An answer with no changes, standing at a position read at `point`: a long-poll's when its wait is over. */
    nothingAt: (epoch: string, position: SyncPosition, point: HistoryPoint): ChangesAnswer => answer(epoch, point, EMPTY, position, false),

    /** A token for a position, issued now: what a stream's keep-alive carries as its id (CONTRACT 13). */
    tokenAt: (epoch: string, position: SyncPosition, point: HistoryPoint): string => encodeSyncToken({ epoch, issuedAt: Date.now(), position, point }),

    /** Called when the primary's history changes (a promotion); returns the unsubscribe. */
    onHistoryChange: (listener: () => void): (() => void) => history.onChange(listener),

    /** Whether the history followed now holds a point an answer was read at. */
    holds: (point: HistoryPoint): boolean => {
      const current = history.current()
      return current !== undefined && holds(current, point.timeline, point.lsn)
    },

    /** Deletes log entries older than the retention, batch by batch; returns how many went. Primary only. */
    prune (): Promise<number> {
      return inBatches(async (batch) => (await prune(db, { hours: options.retentionHours, batch }))[0]?.n ?? 0, PRUNE_BATCH, PRUNE_MAX_BATCHES)
    }
  }
}

export type ChangeFeed = ReturnType<typeof createChangeFeed>
