import type { Database } from './client.js'

/**
 * Shares one read among every request that wants it at about the same time, per database: a request
 * that arrives while a read is running waits for the next one, which starts after it arrived and so
 * sees every write committed before it. Under load this is one query per round trip, not per request.
 */
export function sharedRead<T> (read: (db: Database) => Promise<T>): (db: Database) => Promise<T> {
  const running = new WeakMap<Database, Promise<T>>()
  const queued = new WeakMap<Database, Promise<T>>()

  return function shared (db: Database): Promise<T> {
    const current = running.get(db)
    if (current === undefined) {
      const started = read(db)
      running.set(db, started)
      const done = () => { if (running.get(db) === started) running.delete(db) }
      started.then(done, done)
      return started
    }
    let next = queued.get(db)
    if (next === undefined) {
      next = current.then(() => undefined, () => undefined).then(() => {
        queued.delete(db)
        return shared(db)
      })
      queued.set(db, next)
    }
    return next
  }
}
