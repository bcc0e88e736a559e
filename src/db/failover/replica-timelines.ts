import type { HistorySource } from './elector.js'
import { parseHosts } from './hosts.js'
import { ServerProbe } from './probe.js'

/**
 * Which read replicas follow the primary's history (CONTRACT 14). A replica that streamed from a
 * primary which then failed may hold commits the promoted standby never had, and keeps them until
 * it is rebuilt: it is read from only while it reports the primary's timeline. Probed every
 * `probeEveryMs`, and at once when the primary's history changes (until then it is not read from).
 */
export class ReplicaTimelines {
  readonly #probes: ServerProbe[]
  readonly #timelines: Array<number | undefined>
  readonly #history: HistorySource
  readonly #unsubscribe: () => void
  #timer: NodeJS.Timeout | undefined

  constructor (urls: readonly string[], history: HistorySource, readonly probeEveryMs: number) {
    // A replica URL with several hosts is probed at its first: the history check is per server.
    this.#probes = urls.map((url) => { const { hosts, urlOf } = parseHosts(url); return new ServerProbe(urlOf(hosts[0] ?? { host: 'localhost', port: 5432 })) })
    this.#timelines = urls.map(() => undefined)
    this.#history = history
    this.#unsubscribe = history.onChange(() => {
      this.#timelines.fill(undefined)
      this.#probe().catch(() => {})
    })
  }

  async start (): Promise<void> {
    await this.#probe()
    this.#timer = setInterval(() => { this.#probe().catch(() => {}) }, this.probeEveryMs).unref()
  }

  /** Whether replica `index` was last seen on the primary's timeline. */
  usable = (index: number): boolean => {
    const timeline = this.#timelines[index]
    return timeline !== undefined && timeline === this.#history.current()?.timeline
  }

  async close (): Promise<void> {
    clearInterval(this.#timer)
    this.#unsubscribe()
    await Promise.all(this.#probes.map(async (probe) => probe.close()))
  }

  async #probe (): Promise<void> {
    const states = await Promise.all(this.#probes.map(async (probe) => probe.read()))
    for (const [index, state] of states.entries()) this.#timelines[index] = state?.timeline
  }
}
