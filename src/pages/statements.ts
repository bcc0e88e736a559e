import type { SQL } from 'drizzle-orm'
import { statement, type Statement } from '../db/statement.js'

/**
 * The prepared statements of one collection, by what they read: each is built once, the first time a
 * page needs it, and named `<prefix>_<n>` so that every connection prepares it once too.
 */
export class StatementSet<Row> {
  readonly #byName = new Map<string, Statement<Row>>()

  constructor (private readonly prefix: string) {}

  get (name: string, build: () => SQL): Statement<Row> {
    let found = this.#byName.get(name)
    if (found === undefined) {
      found = statement<Row>(`${this.prefix}_${this.#byName.size}`, build())
      this.#byName.set(name, found)
    }
    return found
  }
}
