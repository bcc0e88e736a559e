import type { ChangesHead } from '../feed.js'
import type { FailureStreak } from './failure-streak.js'

// One watcher per instance (CONTRACT 13): it reads the head of the change log every `intervalMs`
// while any client waits, and hands each head to the hub, which decides for every waiting position at
// once. The database work of watching is one small read per interval, however many clients wait.
//
// Why a poll and not LISTEN/NOTIFY: NOTIFY takes a lock held to the end of every notifying commit,
// which serialises concurrent writers (docs/journal/2026-11-27-what-notify-costs-a-write.md), and a
// trigger that notifies would make every writer pay, SQL clients included. The head read costs the
// writers nothing. A write through this instance's API does not wait for the next interval: it pokes
// the watcher as it answers.

export interface WatcherOptions {
  intervalMs: number
  readHead: () => Promise<ChangesHead>
  /** Given each head and when its read began (performance.now()); awaited before the next read. */
  onHead: (head: ChangesHead, readAt: number) => Promise<void>
  /** Head reads that fail are reported once per streak. */
  reads: FailureStreak
}

/** After a failed read, the next waits this long at least: a database that is down is not hammered. */
const RETRY_MS = 500

export interface ChangeWatcher {
  /** Read now (a write through this instance committed), or as soon as the read in progress ends. */
  poke: () => void
  /** Watch while someone waits; stop when no one does. */
  watch: (wanted: boolean) => void
  /** Head reads made so far. */
  reads: () => number
  stop: () => void
}

export function createChangeWatcher (options: WatcherOptions): ChangeWatcher {
  const onError = (err: unknown): void => { options.reads.failed(err) }
  let wanted = false
  let stopped = false
  let reading = false
  let again = false
  let failed = false
  let reads = 0
  let timer: NodeJS.Timeout | undefined

  function schedule (): void {
    if (!wanted || stopped || reading || timer !== undefined) return
    const delay = failed ? Math.max(RETRY_MS, options.intervalMs) : again ? 0 : options.intervalMs
    timer = setTimeout(() => { tick().catch(onError) }, delay)
  }

  async function tick (): Promise<void> {
    timer = undefined
    if (reading) {
      again = true
      return
    }
    reading = true
    again = false
    const at = performance.now()
    try {
      const head = await options.readHead()
      reads++
      failed = false
      options.reads.succeeded()
      await options.onHead(head, at)
    } catch (err) {
      failed = true
      onError(err)
    } finally {
      reading = false
      schedule()
    }
  }

  return {
    poke () {
      if (!wanted || stopped) return
      if (reading) {
        again = true
        return
      }
      if (timer !== undefined) clearTimeout(timer)
      timer = undefined
      tick().catch(onError)
    },
    watch (on) {
      wanted = on
      if (!on && timer !== undefined) {
        clearTimeout(timer)
        timer = undefined
      }
      schedule()
    },
    reads: () => reads,
    stop () {
      stopped = true
      if (timer !== undefined) clearTimeout(timer)
      timer = undefined
    }
  }
}
