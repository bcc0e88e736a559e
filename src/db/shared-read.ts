import type { Database } from './client.js'
import type { Statement } from './statement.js'

interface Store<K, V> {
  get: (key: K) => V | undefined
  set: (key: K, value: V) => unknown
  delete: (key: K) => boolean
}

/**
 * Shares one read among every request for the same key at about the same time: a request that arrives
 * while a read is running waits for the next one, which starts after it arrived and so sees every write
 * committed before it. Under load this is one query per round trip and key, not per request.
 */
function shareBy<K, T> (running: Store<K, Promise<T>>, queued: Store<K, Promise<T>>): (key: K, read: () => Promise<T>) => Promise<T> {
  return function shared (key: K, read: () => Promise<T>): Promise<T> {
    const current = running.get(key)
    if (current === undefined) {
      const started = read()
      running.set(key, started)
      const done = () => { if (running.get(key) === started) running.delete(key) }
      started.then(done, done)
      return started
    }
    let next = queued.get(key)
    if (next === undefined) {
      next = current.then(() => undefined, () => undefined).then(async (): Promise<T> => {
        queued.delete(key)
        return shared(key, read)
      })
      queued.set(key, next)
    }
    return next
  }
}

/** One shared read per database (a replica's answer is not the primary's). */
export function sharedRead<T> (read: (db: Database) => Promise<T>): (db: Database) => Promise<T> {
  const shared = shareBy<Database, T>(new WeakMap(), new WeakMap())
  return (db) => shared(db, async () => read(db))
}

/** One shared run per database of a statement that takes no parameters: its rows, as sharedRead shares them. */
export function sharedStatement<Row> (run: Statement<Row>): (db: Database) => Promise<Row[]> {
  const shared = shareBy<Database, Row[]>(new WeakMap(), new WeakMap())
  return (db) => shared(db, async () => run(db, {}))
}

/**
 * One shared read per key: polls of one position (every client caught up stands at the same one) cost
 * one query a round, however many clients poll.
 */
export function sharedReadByKey<T> (): (key: string, read: () => Promise<T>) => Promise<T> {
  return shareBy<string, T>(new Map(), new Map())
}
