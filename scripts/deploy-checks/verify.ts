import postgres from 'postgres'
import type { LoadResult } from './load.js'

export interface Verification {
  /** Acknowledged keys whose message exists exactly once, with the id the 201 named. */
  ackedExactlyOnce: number
  /** Acknowledged keys with no message, or more than one, or another id than acknowledged. */
  ackedWrong: string[]
  /** Acknowledged keys with no message at all: lost writes. */
  ackedMissing: number
  /** Keys the client sent (acknowledged or not) with more than one message. */
  keysMoreThanOnce: number
  /** Messages written after the seed whose key the client never sent (or that carry none). */
  unknownMessages: number
  /** Keys the client gave up on that were written all the same (allowed; told). */
  givenUpButWritten: number
}

/**
 * Every acknowledged key once in `messages` with its id, and no message written after the seed
 * (id above `seededMaxId`) that does not carry a key the client sent. Used by the rolling-restart
 * check on its database and by the failover check on the promoted server.
 */
export async function verify (databaseUrl: string, seededMaxId: number, load: LoadResult): Promise<Verification> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    // The client writes each key into its message as `rolling-restart <key>`; anything else is its own group.
    const rows = await sql<Array<{ key: string, ids: number[] }>>`
      SELECT CASE WHEN content LIKE 'rolling-restart %' THEN substr(content, length('rolling-restart ') + 1) ELSE '' END AS key,
        array_agg(id::float8 ORDER BY id) AS ids
      FROM messages WHERE id > ${seededMaxId} GROUP BY 1`
    const found = new Map(rows.map((r) => [r.key, r.ids]))
    const ackedWrong: string[] = []
    let ackedExactlyOnce = 0
    let ackedMissing = 0
    for (const [key, id] of load.acked) {
      const ids = found.get(key) ?? []
      if (ids.length === 0) ackedMissing++
      if (ids.length === 1 && ids[0] === id) ackedExactlyOnce++
      else ackedWrong.push(`${key}: acknowledged id ${id}, messages ${JSON.stringify(ids)}`)
    }
    const givenUp = new Set(load.givenUp.map((f) => /Idempotency-Key (\S+)\)/.exec(f.what)?.[1]))
    return {
      ackedExactlyOnce,
      ackedWrong,
      ackedMissing,
      keysMoreThanOnce: rows.filter((r) => load.sentKeys.has(r.key) && r.ids.length > 1).length,
      unknownMessages: rows.filter((r) => !load.sentKeys.has(r.key)).reduce((n, r) => n + r.ids.length, 0),
      givenUpButWritten: rows.filter((r) => givenUp.has(r.key)).length
    }
  } finally {
    await sql.end()
  }
}
