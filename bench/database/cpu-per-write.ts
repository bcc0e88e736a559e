/**
 * What a write costs PostgreSQL in CPU, when the server runs on this machine: the CPU time of the
 * server's whole process tree (backends, WAL writer, checkpointer, autovacuum), read from /proc before
 * and after. Compared with what one large INSERT ... SELECT costs per row on the same table, in the same
 * run, it tells how much of a created message's cost is per statement rather than per row.
 */
import { readdirSync, readFileSync } from 'node:fs'
import type { Oracle } from '../checks/reference-sql.js'

// Linux reports process times in USER_HZ ticks, 100 a second on every architecture it supports.
const TICKS_PER_SECOND = 100

interface ProcStat { ppid: number, own: number, children: number }

function procStat (pid: number): ProcStat | undefined {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return undefined
  }
  // The command may hold spaces and parentheses: fields are counted from the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  const n = (i: number) => Number(fields[i - 3])
  return { ppid: n(4), own: n(14) + n(15), children: n(16) + n(17) }
}

/** Seconds of CPU the server's tree has used so far: the postmaster, its live children and those it has reaped. */
export type ServerCpu = () => number

/** The server's CPU clock, or undefined when the server is not a process of this machine (or not PostgreSQL). */
export async function serverCpu (oracle: Oracle): Promise<ServerCpu | undefined> {
  if (oracle.label.startsWith('PGlite')) return undefined
  const [row] = await oracle.rows<{ pid: number }>('select pg_backend_pid() as pid')
  const backend = procStat(row!.pid)
  if (backend === undefined) return undefined
  const postmaster = backend.ppid
  try {
    if (!readFileSync(`/proc/${postmaster}/cmdline`, 'utf8').includes('postgres')) return undefined
  } catch {
    return undefined
  }
  return () => {
    const root = procStat(postmaster)
    if (root === undefined) return NaN
    let ticks = root.own + root.children
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue
      const child = procStat(Number(entry))
      if (child?.ppid === postmaster) ticks += child.own
    }
    return ticks / TICKS_PER_SECOND
  }
}

/**
 * Merges the pending lists of the search indexes (GIN, fastupdate) into their posting trees. New rows
 * wait there until a merge, by an insert that overflows the list, by vacuum or by the service's upkeep:
 * a write's cost includes its merge, so a measurement merges what was pending before it, uncounted, and
 * what its writes left pending at its end, counted.
 */
export async function mergeSearchIndexes (oracle: Oracle): Promise<void> {
  await oracle.rows(`select gin_clean_pending_list(i.indexrelid) from pg_index i join pg_class c on c.oid = i.indexrelid
    join pg_am a on a.oid = c.relam where i.indrelid = 'messages'::regclass and a.amname = 'gin'`)
}

export interface BulkInsertCost {
  rows: number
  repeats: number
  /** Server CPU per inserted row, median of the repeats, µs. */
  usPerRow: number
  /** Each repeat's µs per row. */
  each: number[]
}

const BULK_ROWS = 2000
const BULK_REPEATS = 5

/**
 * The reference cost: INSERT ... SELECT of the newest 2,000 messages again (the same content, subjects,
 * priorities and authors as the table holds), each an autocommitted statement through every index,
 * trigger and foreign key the table has, and the merge of the search indexes' pending lists they fill.
 * The copies stay: they are counted like any other write.
 */
export async function bulkInsertCost (oracle: Oracle, cpu: ServerCpu): Promise<BulkInsertCost> {
  const each: number[] = []
  for (let i = 0; i < BULK_REPEATS; i++) {
    await mergeSearchIndexes(oracle)
    const before = cpu()
    await oracle.rows(`insert into messages (content, subject, priority, author_id)
      select content, subject, priority, author_id from (select * from messages order by id desc limit ${BULK_ROWS}) m order by id`)
    await mergeSearchIndexes(oracle)
    each.push((cpu() - before) / BULK_ROWS * 1e6)
  }
  const sorted = [...each].sort((a, b) => a - b)
  return { rows: BULK_ROWS, repeats: BULK_REPEATS, usPerRow: sorted[Math.floor(sorted.length / 2)]!, each }
}
