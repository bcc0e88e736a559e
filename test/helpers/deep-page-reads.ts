import type { Test } from 'tap'
import { deepPageReads, type DeepPageRead } from '../../src/pages/deep-page-reads.js'

/** How each deep page was read (src/pages/deep-page-reads.ts), as the reader reports them, until the test ends. */
export function watchDeepPageReads (t: Test): DeepPageRead[] {
  const reads: DeepPageRead[] = []
  const listener = (message: unknown): void => { reads.push(message as DeepPageRead) }
  deepPageReads.subscribe(listener)
  t.teardown(() => { deepPageReads.unsubscribe(listener) })
  return reads
}
