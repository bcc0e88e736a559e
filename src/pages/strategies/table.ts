import type { PageResult } from '../request.js'
import { anchored } from './anchored.js'
import { awaited } from './awaited.js'
import { byCursor } from './by-cursor.js'
import { followed } from './followed.js'
import { grouped } from './grouped.js'
import { located } from './located.js'
import { start } from './start.js'
import { startSought } from './start-sought.js'
import type { PageAsk, PageStrategy, StrategyName } from './strategy.js'
import { walked } from './walked.js'

// The ways of reading a page, in the order they are tried (src/pages/README.md says why each exists).
// The first that applies and serves the page answers it; one that declines after its statement ran
// hands the page to the next. The walk from the nearer end applies to every page by number, so every
// page is answered.

export const PAGE_STRATEGIES: readonly PageStrategy[] = [
  byCursor,
  startSought,
  start,
  located,
  grouped,
  anchored,
  followed,
  awaited,
  walked
]

/** The strategies that would be tried for `ask`, in order, before any runs (a read may still decline). */
export function applicable<S extends string, F extends string, Row extends object> (ask: PageAsk<S, F, Row>): StrategyName[] {
  const off = ask.reader.off()
  return PAGE_STRATEGIES.filter((strategy) => !off.has(strategy.name) && strategy.applies(ask)).map((strategy) => strategy.name)
}

/** The page, from the first strategy in PAGE_STRATEGIES that applies and serves it. */
export async function readPage<S extends string, F extends string, Row extends object> (ask: PageAsk<S, F, Row>): Promise<PageResult<Row>> {
  const off = ask.reader.off()
  for (const strategy of PAGE_STRATEGIES) {
    if (off.has(strategy.name) || !strategy.applies(ask)) continue
    const found = await strategy.read(ask)
    if (found !== undefined) return found
  }
  // Unreachable: the walk applies to every page by number, the seek to every page by cursor.
  throw new Error('no page strategy served the page')
}
