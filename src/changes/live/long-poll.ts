import { SyncTokenExpiredError } from '../../errors.js'
import type { ChangesAnswer } from '../feed.js'
import type { Delivered, Group, Waiter } from './hub.js'
import { liveSpan } from '../../tracing/live-span.js'

/** A held long-poll (CONTRACT 13): waits for one answer with changes, its `wait` to end, or the client to leave. */
export class HeldPoll implements Waiter {
  readonly follows = false
  group: Group | undefined = undefined
  // Tracing (CONTRACT 15): made while the request is handled; its span counts the answer written.
  readonly #span = liveSpan('long-poll')

  constructor (private readonly settle: (result: ChangesAnswer | Error) => void) {}

  answer (answer: ChangesAnswer): Delivered {
    this.#span.delivered()
    this.settle(answer)
    return 'done'
  }

  expired (): void {
    this.settle(new SyncTokenExpiredError())
  }
}
