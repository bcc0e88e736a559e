/**
 * The database's own floor for a cold page (issue: reads at the database's pace): PostgreSQL answering
 * the keyset seek of a page, prepared, from pgbench (`-M prepared -j 2 -c 16`), on the same data and in
 * the same run as the cold rows. The seek reads 25 rows from a random position, joined to their
 * authors: what one page needs at least, with no total, no cursor and no HTTP.
 */
import { execFile } from 'node:child_process'
import { existsSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { Oracle } from '../checks/reference-sql.js'

export const SEEK_FLOOR_KEY = 'seek-floor'

const SCRIPT = `\\set r random(1, :maxid)
SELECT m.id, m.content, m.subject, m.priority, m.created_at, u.id AS author_id, u.name AS author_name
FROM messages m JOIN users u ON u.id = m.author_id
WHERE m.id >= :r ORDER BY m.id LIMIT 25;
`

export interface SeekFloor {
  tps: number
  clients: number
  seconds: number
  maxId: number
  pgbench: string
}

/** pgbench on the PATH, else from a PostgreSQL server package of this machine; undefined when there is none. */
function findPgbench (): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir !== '' && existsSync(join(dir, 'pgbench'))) return join(dir, 'pgbench')
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return undefined
  for (const version of readdirSync(root).sort().reverse()) if (existsSync(join(root, version, 'bin/pgbench'))) return join(root, version, 'bin/pgbench')
  return undefined
}

/** The seek's transactions a second over `seconds`, or why it could not be measured. */
export async function measureSeekFloor (oracle: Oracle, databaseUrl: string, seconds: number): Promise<SeekFloor | string> {
  const pgbench = findPgbench()
  if (pgbench === undefined) return 'pgbench is not installed (PostgreSQL client programs)'
  const [row] = await oracle.rows<{ max: string | null }>('select max(id)::text as max from messages')
  const maxId = Number(row?.max ?? 0)
  const script = join(tmpdir(), `messages-api-seek-floor-${process.pid}.sql`)
  writeFileSync(script, SCRIPT)
  const clients = 16
  const { stdout } = await promisify(execFile)(pgbench, ['-n', '-M', 'prepared', '-j', '2', '-c', String(clients), '-T', String(Math.max(1, Math.round(seconds))),
    '-D', `maxid=${maxId}`, '-f', script, databaseUrl], { maxBuffer: 1 << 20 })
  const tps = Number(/tps = ([\d.]+)/.exec(stdout)?.[1])
  if (!Number.isFinite(tps)) return `pgbench printed no tps: ${stdout.slice(-300)}`
  return { tps, clients, seconds, maxId, pgbench }
}
