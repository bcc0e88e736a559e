import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { statement, type Statement } from '../db/statement.js'
import { versionSql } from '../db/counters.js'
import { entityTag, ifNoneMatch, type Conditional, type Revalidated } from './entity-tag.js'
import { sharedRead } from '../db/shared-read.js'
import { SizedLru } from '../memory/sized-lru.js'
import { noteCacheLookup } from '../tracing/steps.js'

// Collection reads are remembered with the versions of the tables they read (drizzle/0006: every
// row any statement writes, from any client, grows its table's version). Each request reads the
// current versions first; an entry is served only when they are unchanged, so a write is visible to
// the next read. Version reads are shared (sharedRead), so they stay one query per round trip.

export type Versions = string

// One index lookup per table a cache depends on. Reading every table's version in one scan of the
// counters was a sequential scan of all their rows: run back to back under load, it took more CPU than
// the requests it validated (docs/performance.md#table-versions).
function versionsStatement (tables: readonly string[]): Statement<{ versions: string }> {
  const parts = tables.map((table) => sql`${versionSql(table)}::text`)
  return statement(`table_versions_${tables.join('_')}`, sql`SELECT ${sql.join(parts, sql` || ',' || `)} AS versions`)
}

export type VersionReader = (db: Database) => Promise<Versions>

const readers = new Map<string, VersionReader>()

/**
 * Reads the versions of `tables` on a database. One reader per set of tables, so every cache and gate
 * over the same tables shares its reads (see above) and its prepared statement.
 */
export function versionReader (tables: readonly string[]): VersionReader {
  const name = tables.join(',')
  let reader = readers.get(name)
  if (reader === undefined) {
    const readVersions = versionsStatement(tables)
    reader = sharedRead(async (db) => (await readVersions(db, {}))[0]?.versions ?? '')
    readers.set(name, reader)
  }
  return reader
}

/**
 * Conditional reads (CONTRACT 12) of whatever `tables` hold: the tag is decided from their versions
 * and the request's key, and a client whose copy carries it gets its 304 after that one version read.
 */
export class VersionGate {
  readonly #versions: VersionReader

  constructor (tables: readonly string[]) {
    this.#versions = versionReader(tables)
  }

  /**
   * `compute` gets the versions the answer is tagged with, and runs after they were read, so a body
   * is never older than its tag. `exists` tells, for `If-None-Match: *`, whether the value is a current
   * representation (an item that is absent or forbidden has none); without it every value is one.
   */
  async revalidate<T> (db: Database, key: string, conditional: Conditional, compute: (versions: Versions) => Promise<T>,
    exists?: (value: T) => boolean): Promise<Revalidated<T>> {
    const versions = await this.#versions(db)
    const tag = entityTag(versions, `${key}\0${conditional.scope}`)
    const match = ifNoneMatch(conditional.ifNoneMatch, tag)
    if (match === 'tag' || (match === 'any' && exists === undefined)) return { tag, notModified: true }
    const value = await compute(versions)
    if (match === 'any' && exists?.(value) === true) return { tag, notModified: true }
    return { tag, notModified: false, value }
  }
}

interface Entry<T> { versions: Versions, value: T }

/** Least-recently-used entries, bounded by an estimate of the bytes they hold. */
export class VersionedCache<T> {
  readonly #entries: SizedLru<Entry<T>>
  readonly #sizeOf: (value: T) => number
  readonly #gate: VersionGate

  /**
   * `tables`: every table whose rows the cached values show; a write to any of them retires them. A
   * value larger than an eighth of `maxBytes` is not kept, so that one cannot empty the cache.
   */
  constructor (tables: readonly string[], maxBytes: number, sizeOf: (value: T) => number) {
    this.#gate = new VersionGate(tables)
    this.#entries = new SizedLru(maxBytes, maxBytes / 8)
    this.#sizeOf = sizeOf
  }

  /**
   * The value for `key` as the database now holds it, remembered or computed and remembered, and
   * tagged (CONTRACT 12) from the versions it is answered at and the key: when the client's copy
   * carries the tag, nothing but the versions is read.
   */
  revalidate (db: Database, key: string, conditional: Conditional, compute: () => Promise<T>, exists?: (value: T) => boolean): Promise<Revalidated<T>> {
    return this.#gate.revalidate(db, key, conditional, async (versions) => this.#lookup(key, versions, compute), exists)
  }

  async #lookup (key: string, versions: Versions, compute: () => Promise<T>): Promise<T> {
    const hit = this.#entries.get(key)
    const current = hit !== undefined && hit.versions === versions
    noteCacheLookup(current)
    if (current) return hit.value
    // Computed after the versions were read: if a write lands in between, the entry is newer than
    // its versions say, and the next read simply computes it again.
    const value = await compute()
    this.#entries.set(key, { versions, value }, this.#sizeOf(value))
    return value
  }
}
