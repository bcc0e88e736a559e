// Reads of the change feed that fail, as the log sees them: the first failure of a streak is
// reported, the rest only counted, and the streak's end says how many there were. A database that
// times out on one position would otherwise write a warning at every retry.

/** Where streaks are reported; `read` names what failed ('head' or 'answer'). */
export interface FailureReport {
  failed: (read: string, err: unknown) => void
  recovered: (read: string, failures: number) => void
}

export class FailureStreak {
  #failures = 0

  constructor (private readonly read: string, private readonly report: FailureReport) {}

  failed (err: unknown): void {
    if (this.#failures++ === 0) this.report.failed(this.read, err)
  }

  succeeded (): void {
    if (this.#failures === 0) return
    const failures = this.#failures
    this.#failures = 0
    this.report.recovered(this.read, failures)
  }
}
