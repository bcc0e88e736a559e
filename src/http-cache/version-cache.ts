import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { statement, type Statement } from '../db/statement.js'
import { versionSql } from '../db/counters.js'
import { sharedStatement } from '../db/shared-read.js'
import { SizedLru } from '../memory/sized-lru.js'
import { noteCacheLookup } from '../tracing/steps.js'

// Collection reads are remembered with the versions of the tables they read (drizzle/0006: every
// row any statement writes, from any client, grows its table's version). Each request reads the
// current versions first; an entry is served only when they are unchanged, so a write is visible to
// the next read. Version reads are shared (sharedStatement), so they stay one query per round trip.

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

const versionsOf = (rows: Array<{ versions: string }>): Versions => rows[0]?.versions ?? ''

/**
 * Reads the versions of `tables` on a database. One reader per set of tables, so every cache and tag
 * over the same tables shares its reads (see above) and its prepared statement.
 */
export function versionReader (tables: readonly string[]): VersionReader {
  const name = tables.join(',')
  let reader = readers.get(name)
  if (reader === undefined) {
    const readVersions = sharedStatement(versionsStatement(tables))
    reader = async (db) => versionsOf(await readVersions(db))
    readers.set(name, reader)
  }
  return reader
}

interface Entry<T> { versions: Versions, value: T }

/**
 * Least-recently-used values, each remembered with the versions it was read at, bounded by an estimate
 * of the bytes they hold. A repository reads the versions (`versions`), tags its answer from them
 * (`tagFor` in ./entity-tag.ts), and only then gets or reads and sets the value.
 */
export class VersionedCache<T> {
  readonly #entries: SizedLru<Entry<T>>
  /** The versions of the cache's tables on a database: one shared read (versionReader). */
  readonly versions: VersionReader

  /**
   * `tables`: every table whose rows the cached values show; a write to any of them retires them. A
   * value larger than an eighth of `maxBytes` is not kept, so that one cannot empty the cache.
   */
  constructor (tables: readonly string[], maxBytes: number) {
    this.versions = versionReader(tables)
    this.#entries = new SizedLru(maxBytes, maxBytes / 8)
  }

  /** The value remembered for `key` at exactly `versions`; undefined when there is none. */
  get (key: string, versions: Versions): T | undefined {
    const hit = this.#entries.get(key)
    const current = hit !== undefined && hit.versions === versions
    noteCacheLookup(current)
    return current ? hit.value : undefined
  }

  /**
   * Remembers `value`, read after `versions` were: if a write landed in between, the entry is newer
   * than its versions say, and the next read simply reads it again. Returns `value`.
   */
  set (key: string, versions: Versions, value: T, bytes: number): T {
    this.#entries.set(key, { versions, value }, bytes)
    return value
  }
}
