/** What /proc tells of the processes on this machine: a process's resident memory and CPU time, and PostgreSQL's. */
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

const TICKS_PER_SECOND = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100

/** VmRSS of `pid` in kB, or 0 when it cannot be read. */
export function rssKb (pid: number | undefined): number {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match === null ? 0 : Number(match[1])
  } catch {
    return 0
  }
}

/** comm and utime+stime (seconds) of a process, from /proc/<pid>/stat; comm may hold spaces and parentheses. */
function stat (pid: string): { comm: string, seconds: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const open = text.indexOf('(')
    const close = text.lastIndexOf(')')
    const fields = text.slice(close + 2).split(' ')
    // After the comm: state is field 3, utime 14 and stime 15 (man 5 proc), so indexes 11 and 12 here.
    return { comm: text.slice(open + 1, close), seconds: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND }
  } catch {
    return undefined
  }
}

/** CPU seconds (user + system) `pid` has used so far. */
export function cpuSeconds (pid: number | undefined): number {
  return pid === undefined ? 0 : stat(String(pid))?.seconds ?? 0
}

/** The postgres processes of this machine that work for `database`: its backends, and the server's own (WAL writer, checkpointer, autovacuum...). */
function postgresPids (database: string): string[] {
  const pids: string[] = []
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || stat(pid)?.comm.startsWith('postgres') !== true) continue
    let title = ''
    try {
      title = readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ')
    } catch {
      continue
    }
    // A backend's title is `postgres: <cluster>: <user> <database> <address>(<port>) <state>`; the server's own processes name no client.
    const backend = /^postgres: (?:[^:]+: )?\S+ (\S+) [\w.:[\]-]+\(\d+\)/.exec(title)
    if (backend === null || backend[1] === database) pids.push(pid)
  }
  return pids
}

const SAMPLE_MS = 100

/**
 * CPU seconds (user + system) spent by PostgreSQL for `database` from now until stop(): its backends and
 * the server's own processes, when PostgreSQL runs on this machine. Backends of other databases (another
 * benchmark, tests) are left out. Read every SAMPLE_MS, so a backend that exits meanwhile (the service's
 * pool closes idle connections) keeps what it had used when last read.
 */
export function postgresCpu (database: string): { stop: () => number } {
  const first = new Map<string, number>()
  const last = new Map<string, number>()
  let initial = true
  const read = (): void => {
    for (const pid of postgresPids(database)) {
      const seconds = stat(pid)?.seconds
      if (seconds === undefined) continue
      // A process that starts during the measurement counts from zero.
      if (!first.has(pid)) first.set(pid, initial ? seconds : 0)
      last.set(pid, seconds)
    }
    initial = false
  }
  read()
  const timer = setInterval(read, SAMPLE_MS)
  timer.unref()
  return {
    stop () {
      clearInterval(timer)
      read()
      let total = 0
      for (const [pid, seconds] of last) total += seconds - first.get(pid)!
      return total
    }
  }
}

/** Whether any postgres process is visible here (PostgreSQL on this machine, not elsewhere). */
export const postgresVisible = (): boolean => readdirSync('/proc').some((pid) => /^\d+$/.test(pid) && stat(pid)?.comm.startsWith('postgres') === true)
