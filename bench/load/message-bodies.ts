/** What the writing rows and the delta sync catch-up send. */
import { generateMessage } from '../../scripts/seed.js'
import { createRandom } from '../../scripts/seeded-random.js'

/** The bodies POST sends, one after another: generated messages, the same every run. */
export function postBodies (): string[] {
  const random = createRandom(42)
  // The API takes no null subject: a message without one leaves the member out.
  return Array.from({ length: 1000 }, () => {
    const { subject, ...message } = generateMessage(random)
    return JSON.stringify(subject === null ? message : { ...message, subject })
  })
}
