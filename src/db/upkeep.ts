// Upkeep on the primary that runs now and then for as long as the app does: pruning, compaction,
// merges. A failed run is logged and the task runs again at its next turn; nothing waits for it.

export interface UpkeepLog {
  warn: (details: object, message: string) => void
}

/** Runs `task` every `ms` until the returned function is called; a failure logs `failure`. */
export function every (ms: number, task: () => Promise<unknown>, log: UpkeepLog, failure: string): () => void {
  const timer = setInterval(() => {
    task().catch((err: unknown) => { log.warn({ err: { message: err instanceof Error ? err.message : String(err) } }, failure) })
  }, ms)
  timer.unref()
  return () => { clearInterval(timer) }
}
