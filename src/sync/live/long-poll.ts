import { SyncTokenExpiredError } from '../../errors.js'
import type { ChangesAnswer } from '../changes.js'
import type { Delivered, Group, Waiter } from './hub.js'

/** A held long-poll (CONTRACT 13): waits for one answer with changes, its `wait` to end, or the client to leave. */
export class HeldPoll implements Waiter {
  readonly follows = false
  group: Group | undefined = undefined

  constructor (private readonly settle: (result: ChangesAnswer | Error) => void) {}

  answer (answer: ChangesAnswer): Delivered {
    this.settle(answer)
    return 'done'
  }

  expired (): void {
    this.settle(new SyncTokenExpiredError())
  }
}
