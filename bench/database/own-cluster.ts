/**
 * A PostgreSQL server of the benchmark's own, so that a run can measure the service against the server
 * settings a deployment would use without touching the machine's server. The data directory is kept
 * between runs (a seeded 10,000,000-message database takes minutes to build); each start rewrites the
 * settings, so one directory can be measured under both profiles.
 */
import { existsSync } from 'node:fs'
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { asRoot, binDir, ids, run, serverUser } from '../../scripts/postgres/binaries.js'

/**
 * The settings docs/operations.md ("Sizing PostgreSQL") recommends for a production server of this size: 24 GiB of memory, two cores,
 * a 10,000,000-message database of about 5.4 GB. `debian` adds nothing to what initdb writes, which is
 * what Debian's pg_createcluster ships (shared_buffers 128MB, max_wal_size 1GB, checkpoint_timeout 5min,
 * wal_compression off, effective_cache_size 4GB).
 */
export const SETTINGS = {
  debian: {},
  recommended: {
    // A quarter of memory: the indexes a write touches stay in PostgreSQL's own cache at 10,000,000 rows.
    shared_buffers: '6GB',
    // What the planner may assume the OS caches besides: the rest of memory, less the service's share.
    effective_cache_size: '18GB',
    // Full-page images after a checkpoint are most of the WAL of random index inserts; lz4 halves them cheaply.
    wal_compression: 'lz4',
    // Checkpoints by time, not by WAL volume: fewer full-page images per written row.
    max_wal_size: '16GB',
    min_wal_size: '2GB',
    checkpoint_timeout: '15min',
    checkpoint_completion_target: '0.9',
    maintenance_work_mem: '1GB'
  }
} as const satisfies Record<string, Record<string, string>>

export type SettingsName = keyof typeof SETTINGS

/** What the profile of the write path reads: statements (trigger bodies included), functions, I/O and WAL timing. */
const PROFILE_SETTINGS = {
  shared_preload_libraries: 'pg_stat_statements',
  'pg_stat_statements.track': 'all',
  'pg_stat_statements.max': '10000',
  track_functions: 'all',
  track_io_timing: 'on',
  track_wal_io_timing: 'on'
}

export interface ClusterOptions {
  settings: SettingsName
  /** The data directory; created by initdb when absent. */
  dir: string
  port: number
  /** Load pg_stat_statements and time functions and I/O. */
  profile: boolean
}

/** One directory for both profiles: the same databases are measured under each. */
export const DEFAULT_DIR = join(tmpdir(), 'messages-api-bench-pg')

const conf = (values: Record<string, string>) =>
  Object.entries(values).map(([name, value]) => `${name} = '${value}'`).join('\n') + '\n'

/** initdb when needed, then (re)start the server with the named settings; returns its URL. */
export async function startCluster (options: ClusterOptions): Promise<string> {
  const bin = binDir()
  const { dir } = options
  if (!existsSync(join(dir, 'PG_VERSION'))) {
    await mkdir(dir, { recursive: true })
    if (asRoot) {
      const { uid, gid } = ids(serverUser)
      await chown(dir, uid, gid)
    }
    await chmod(dir, 0o700)
    run(join(bin, 'initdb'), ['-D', dir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8'], 120_000)
  }
  stopCluster(dir)
  // postgresql.auto.conf is read last: the profile's settings replace whatever the last start wrote.
  const autoConf = join(dir, 'postgresql.auto.conf')
  await writeFile(autoConf, conf({
    listen_addresses: '127.0.0.1',
    port: String(options.port),
    unix_socket_directories: dir,
    max_connections: '200',
    ...SETTINGS[options.settings],
    ...(options.profile ? PROFILE_SETTINGS : {})
  }))
  if (asRoot) {
    const { uid, gid } = ids(serverUser)
    await chown(autoConf, uid, gid)
  }
  run(join(bin, 'pg_ctl'), ['-D', dir, '-l', join(dir, 'server.log'), '-w', '-t', '120', 'start'], 150_000)
  return `postgres://postgres@127.0.0.1:${options.port}/postgres`
}

/** Stops the server of `dir` if it runs (fast: sessions are ended). */
export function stopCluster (dir: string): void {
  if (!existsSync(join(dir, 'postmaster.pid'))) return
  run(join(binDir(), 'pg_ctl'), ['-D', dir, '-m', 'fast', '-w', 'stop'], 120_000)
}
