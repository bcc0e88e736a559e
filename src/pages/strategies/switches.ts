// Which ways of reading a page can be turned off, for a bench sitting that measures what each one buys
// (src/pages/README.md). `PAGE_STRATEGIES_OFF` (src/config.ts) names them; unset, every one is on.
// The cursor seek, the walk from the start and the walk from the nearer end are not among them: they
// are the only reads of some pages, and every other way falls back on them.

export const SWITCHABLE_STRATEGIES = ['start-sought', 'located', 'grouped', 'anchored', 'followed', 'awaited'] as const

export type SwitchableStrategy = typeof SWITCHABLE_STRATEGIES[number]

const isSwitchable = (name: string): name is SwitchableStrategy => (SWITCHABLE_STRATEGIES as readonly string[]).includes(name)

/** The names in a comma-separated list, or the first one that is not a strategy that can be turned off. */
export function parseStrategiesOff (value: string | undefined): SwitchableStrategy[] | { unknown: string } {
  if (value === undefined) return []
  const names: SwitchableStrategy[] = []
  for (const name of value.split(',').map((part) => part.trim()).filter((part) => part !== '')) {
    if (!isSwitchable(name)) return { unknown: name }
    if (!names.includes(name)) names.push(name)
  }
  return names
}

let turnedOff: ReadonlySet<SwitchableStrategy> = new Set()

/**
 * Turns off the named strategies for every reader of the process that was not given its own list
 * (src/app.ts, from the configuration). Process-wide on purpose: readers are built when their modules
 * load, before any configuration is read.
 */
export function turnOffPageStrategies (names: readonly SwitchableStrategy[]): void {
  turnedOff = new Set(names)
}

/** The strategies turned off for the process (none unless PAGE_STRATEGIES_OFF names some). */
export const strategiesOff = (): ReadonlySet<SwitchableStrategy> => turnedOff
