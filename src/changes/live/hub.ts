import { setImmediate } from 'node:timers/promises'
import { SyncTokenExpiredError } from '../../errors.js'
import type { ChangesAnswer, ChangesHead, ChangeFeed } from '../feed.js'
import { positionKey, type HistoryPoint, type SyncPosition } from '../token.js'
import { FailureStreak, type FailureReport } from './failure-streak.js'
import { createChangeWatcher } from './watcher.js'

// The clients an instance holds, grouped by the position they wait at (CONTRACT 13). Each head the
// watcher reads is judged once per position, not once per client; an answer is read and serialised
// once per position and handed to every client waiting there. Clients that are answered move on
// together to the answer's `next`, and clients whose position no answer can reach move up to the
// head's, so positions merge: idle clients all wait at one position, and one write costs one read.
//
// Why sharing is exact: an answer for a position, read from any snapshot, is an answer a poll from
// that position could have got (src/changes/feed.ts). A client that joins a position while its answer
// is being read receives that answer, as if its own poll had arrived a moment earlier.
//
// After a failover (CONTRACT 14) a position reached from state the new primary never had would skip
// transactions that now commit under the same ids: each group keeps the latest point in the
// database's history that its clients' answers and position were read at, and when the primary's
// history changes, the clients of every group the new history does not hold are ended (410 for a
// long-poll; a stream ends and its client comes back with its last event's id, which is judged alone).
//
// Streams are paced by their clients: a stream that has an answer's worth waiting unsent leaves its
// group with that answer's position, and is placed again there once its client has read enough, as
// a long-poll arriving then would be. So a group holds only streams ready for the next answer, a read
// stays shared among them, and catching up (hasMore) moves on only for streams that have drained.
// Nor does a stream get an answer without room for it among what its client's address may hold
// (unsent-bytes.ts, CONTRACT 16): it takes that room before it is placed where an answer is read at
// once (a copy, a catch-up), and one that finds none when an answer comes for a position it waited
// at with nothing to say is placed there again once it has room, to be answered then.

/**
 * What became of a client given an answer: a long-poll is 'done'; a stream is 'ready' for the next,
 * 'paced' until its client has read enough (or it has room for the next), or 'deferred', not
 * written, until it has room for an answer at its position; a client that left is 'gone'.
 */
export type Delivered = 'done' | 'ready' | 'paced' | 'deferred' | 'gone'

/** A client held by the hub: a long-poll that waits for one answer, or a stream that follows the feed. */
export interface Waiter {
  /** A stream: it follows on after an answer. A long-poll leaves with its answer. */
  readonly follows: boolean
  /** Where it waits; set by the hub. */
  group: Group | undefined
  /**
   * An answer with changes for its position. `event` frames it for a stream, once for every stream
   * waiting there.
   */
  answer: (answer: ChangesAnswer, event: () => Buffer) => Delivered
  /**
   * After 'paced' or 'deferred': runs `resume` once the client has read enough and, when `due` (it
   * is placed where an answer is read at once), it holds room for that answer.
   */
  whenReady?: (resume: () => void, due: boolean) => void
  /** An answer without changes left it waiting for changes: what it held for that answer is no longer needed. */
  idle?: () => void
  /** Its position expired (410): the log no longer holds what it needs. */
  expired: () => void
}

/** Where a client is placed: a position, the answer size, and whether it is catching up. */
export interface Placement {
  /** The feed's epoch and position; both undefined for the start of the initial copy. */
  epoch: string | undefined
  position: SyncPosition | undefined
  limit: number
  /** Its last answer said more follow (hasMore): the next is read at once. */
  catchingUp: boolean
  /** Where in the database's history its position was read. */
  point: HistoryPoint
}

export interface Group {
  readonly key: string
  /** The feed's epoch and position; both undefined for the start of the initial copy. */
  readonly epoch: string | undefined
  readonly position: SyncPosition | undefined
  readonly limit: number
  readonly waiters: Set<Waiter>
  /** The latest point of the database's history its clients were answered or moved from. */
  point: HistoryPoint
  /** Read at once, not at the watcher's word: the clients are catching up (hasMore). */
  due: boolean
  reading: boolean
  /** Reads of this position that failed in a row, and not before when (performance.now()) to try again. */
  failures: number
  retryAt: number
}

/** Clients written to per turn of the event loop when an answer fans out. */
export const FAN_OUT_SLICE = 256

// A read that keeps failing (a statement timeout, a row the database cannot render) is tried again
// later each time, from 100 ms up to 5 s, instead of at every head read.
const RETRY_FIRST_MS = 100
const RETRY_MAX_MS = 5_000
const retryDelay = (failures: number): number => Math.min(RETRY_FIRST_MS * 2 ** (failures - 1), RETRY_MAX_MS)

export type LiveFeed = Pick<ChangeFeed, 'answerAt' | 'head' | 'verdict' | 'changesAfter' | 'holds' | 'onHistoryChange'>

const laterPoint = (a: HistoryPoint, b: HistoryPoint): HistoryPoint =>
  a.timeline !== b.timeline ? (a.timeline > b.timeline ? a : b) : (a.lsn >= b.lsn ? a : b)
const pointOf = (head: ChangesHead): HistoryPoint => ({ timeline: Number(head.tli), lsn: BigInt(head.lsn) })

export interface HubOptions {
  feed: LiveFeed
  watchMs: number
  /** Frames an answer as one event of a stream. */
  frame: (answer: ChangesAnswer) => Buffer
  /** An answer was written to every client waiting for it, this long (seconds) after it became answerable. */
  delivered: (delaySeconds: number) => void
  /** Failed reads of the feed, reported once per streak (of head reads, of answer reads), then its end. */
  failures: FailureReport
}

export function createLiveHub (options: HubOptions) {
  const { feed } = options
  const groups = new Map<string, Group>()
  let answerReads = 0
  let closed = false
  const answers = new FailureStreak('answer', options.failures)
  const watcher = createChangeWatcher({ intervalMs: options.watchMs, readHead: feed.head, onHead, reads: new FailureStreak('head', options.failures) })
  const onError = (err: unknown): void => { answers.failed(err) }

  /** Forgets a group that no one waits in and that is not being read; the watcher rests when none is left. */
  function tidy (group: Group): void {
    if (group.waiters.size === 0 && !group.reading && groups.get(group.key) === group) groups.delete(group.key)
    if (groups.size === 0) watcher.watch(false)
  }

  /** Puts waiters at a position, in its group (made when none waits there yet). */
  function place (waiters: readonly Waiter[], at: Placement): void {
    const { epoch, position, limit, catchingUp: due, point } = at
    if (waiters.length === 0) return
    // Read before the history followed changed, past where the new one branched off: ended now.
    if (!feed.holds(point)) {
      for (const waiter of waiters) end(waiter)
      return
    }
    const key = positionKey(epoch, position, limit)
    let group = groups.get(key)
    if (group === undefined) {
      group = { key, epoch, position, limit, waiters: new Set(), due, reading: false, point, failures: 0, retryAt: 0 }
      groups.set(key, group)
    } else {
      group.point = laterPoint(group.point, point)
    }
    for (const waiter of waiters) {
      group.waiters.add(waiter)
      waiter.group = group
    }
    if (due) group.due = true
    if (group.due && !group.reading && group.retryAt <= performance.now()) readGroup(group, performance.now()).catch(onError)
    watcher.watch(true)
  }

  function leave (waiter: Waiter): void {
    const group = waiter.group
    if (group === undefined) return
    waiter.group = undefined
    group.waiters.delete(waiter)
    tidy(group)
  }

  /** Moves every waiter of a group to another position (merging with the group waiting there). */
  function move (group: Group, waiters: readonly Waiter[], epoch: string, position: SyncPosition, catchingUp: boolean, point: HistoryPoint): void {
    if (groups.get(group.key) === group) groups.delete(group.key)
    place(waiters, { epoch, position, limit: group.limit, catchingUp, point: laterPoint(group.point, point) })
    tidy(group)
  }

  /** Ends a client whose position expired (410): out of its group, and told. */
  function end (waiter: Waiter): void {
    waiter.group?.waiters.delete(waiter)
    waiter.group = undefined
    waiter.expired()
  }

  function expire (group: Group): void {
    if (groups.get(group.key) === group) groups.delete(group.key)
    for (const waiter of [...group.waiters]) end(waiter)
    tidy(group)
  }

  async function deliver (group: Group, answer: ChangesAnswer, foundAt: number): Promise<void> {
    if (groups.get(group.key) === group) groups.delete(group.key)
    // An answer without changes is nobody's event: everyone waits on, at its `next`.
    if (!answer.empty) {
      let event: Buffer | undefined
      const frame = (): Buffer => (event ??= options.frame(answer))
      const waiters = [...group.waiters]
      const point = laterPoint(group.point, answer.point)
      let written = 0
      for (let i = 0; i < waiters.length; i++) {
        // Thousands of socket writes take tens of milliseconds: requests, and the reads of other
        // positions, go on between slices instead of waiting behind the whole fan-out.
        if (i > 0 && i % FAN_OUT_SLICE === 0) {
          await setImmediate()
          if (closed) return
        }
        const waiter = waiters[i]!
        // A client that left meanwhile is no longer in the group.
        if (!group.waiters.has(waiter)) continue
        const delivered = waiter.answer(answer, frame)
        if (delivered !== 'deferred' && delivered !== 'gone') written++
        if (delivered === 'ready') continue
        group.waiters.delete(waiter)
        waiter.group = undefined
        // Its client reads before it goes on from this answer's position, alone or with others there then.
        if (delivered === 'paced') {
          const at: Placement = { epoch: answer.epoch, position: answer.next, limit: group.limit, catchingUp: answer.hasMore, point }
          waiter.whenReady?.(() => { if (!closed) place([waiter], at) }, at.catchingUp)
        }
        // Nothing written: it is answered from where it stood once it has room, by a read of its own then.
        if (delivered === 'deferred') {
          const at: Placement = { epoch: group.epoch, position: group.position, limit: group.limit, catchingUp: true, point: group.point }
          waiter.whenReady?.(() => { if (!closed) place([waiter], at) }, true)
        }
      }
      // Once per answer, not per client: the delay until the last client waiting for it was written to.
      if (written > 0) options.delivered((performance.now() - foundAt) / 1000)
    }
    const staying = [...group.waiters]
    group.waiters.clear()
    // Nothing was written to them, and nothing is read for them at once: they wait for changes.
    if (answer.empty && !answer.hasMore) for (const waiter of staying) waiter.idle?.()
    move(group, staying, answer.epoch, answer.next, answer.hasMore, answer.point)
  }

  async function readGroup (group: Group, foundAt: number): Promise<void> {
    group.reading = true
    answerReads++
    let answer: ChangesAnswer
    try {
      const { epoch, position } = group
      answer = !group.due && epoch !== undefined && position?.kind === 'changes'
        ? await feed.changesAfter(epoch, position, group.limit)
        : await feed.answerAt(epoch, position, group.limit)
    } catch (err) {
      group.reading = false
      if (err instanceof SyncTokenExpiredError) expire(group)
      else {
        // Tried again at a head read after its delay.
        group.failures++
        group.retryAt = performance.now() + retryDelay(group.failures)
        answers.failed(err)
        tidy(group)
      }
      return
    }
    answers.succeeded()
    group.reading = false
    group.failures = 0
    group.retryAt = 0
    if (!closed) await deliver(group, answer, foundAt)
  }

  // Judges every waiting position against a head. Reads and fan-outs it starts go on by themselves:
  // the watcher keeps its pace while an answer is written to thousands of streams, and a position
  // being read or written to is out of the map until its clients wait again.
  function onHead (head: ChangesHead, headAt: number): Promise<void> {
    const read = (group: Group): void => { readGroup(group, headAt).catch(onError) }
    const now = performance.now()
    for (const group of [...groups.values()]) {
      if (group.reading || group.waiters.size === 0 || group.retryAt > now) continue
      const { epoch, position } = group
      if (group.due || epoch === undefined || position === undefined || position.kind === 'snapshot') {
        read(group)
        continue
      }
      const verdict = feed.verdict(head, epoch, position)
      if (verdict.kind === 'expired') expire(group)
      else if (verdict.kind === 'read') read(group)
      else if (verdict.next !== position && positionKey(epoch, verdict.next, group.limit) !== group.key) move(group, [...group.waiters], epoch, verdict.next, false, pointOf(head))
    }
    return Promise.resolve()
  }

  // The primary's history changed: every position it does not hold is ended.
  const unsubscribe = feed.onHistoryChange(() => {
    for (const group of [...groups.values()]) if (!feed.holds(group.point)) expire(group)
  })

  return {
    /** Holds a client at a position; one catching up has its answer read at once. */
    place (waiter: Waiter, at: Placement): void {
      if (!closed) place([waiter], at)
    },
    leave,
    /** A write through this instance committed: look now rather than at the next interval. */
    poke: () => { watcher.poke() },
    stats: () => ({ watchReads: watcher.reads(), answerReads, positions: groups.size }),
    close (): void {
      closed = true
      unsubscribe()
      watcher.stop()
    }
  }
}

export type LiveHub = ReturnType<typeof createLiveHub>
