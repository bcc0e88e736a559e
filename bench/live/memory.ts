/**
 * The memory row: the service's resident memory per idle stream. MEMORY_CONNECTIONS SSE streams are opened
 * at a caught-up position and left idle; VmRSS is read before, while they are open (after a pause, so a
 * collection can settle), and after they close.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { startFleet } from './fleet.js'
import type { LiveMode } from './protocol.js'
import type { IdleMemory, MemoryReport } from './report.js'
import { MEMORY_CONNECTIONS, MEMORY_KEY } from './rows.js'
import { catchUp, nextMessageId, steadyRssMb, waitHeld, type LiveSession } from './session.js'

const SETTLE_MS = 3000
const HOLD_TIMEOUT_MS = 120_000

async function idle (session: LiveSession, mode: LiveMode, connections: number, problems: string[]): Promise<IdleMemory> {
  const { service } = session
  const fleet = await startFleet(connections)
  try {
    const since = await catchUp(session)
    const baseId = await nextMessageId(service.base)
    await sleep(SETTLE_MS)
    const beforeMb = await steadyRssMb(service.process.pid, 7, 300)
    const opened = await fleet.open({ base: service.base, mode, connections, since, baseId })
    if (opened.open < connections) problems.push(`${mode}: ${connections - opened.open} of ${connections} clients did not open; the first: ${opened.failures[0] ?? '?'}`)
    const held = await waitHeld(service.base, opened.open, HOLD_TIMEOUT_MS)
    if (held < opened.open) problems.push(`${mode}: the service held ${held} of ${opened.open} clients`)
    await sleep(SETTLE_MS)
    const openMb = await steadyRssMb(service.process.pid, 7, 300)
    const closed = await fleet.close()
    if (closed.errorCount > 0) problems.push(`${mode}: ${closed.errorCount} client errors while idle; the first: ${closed.errors[0] ?? '?'}`)
    await sleep(SETTLE_MS)
    const afterCloseMb = await steadyRssMb(service.process.pid, 7, 300)
    const result: IdleMemory = { mode, connections, open: held, beforeMb, openMb, afterCloseMb, perConnectionKb: (openMb - beforeMb) * 1024 / Math.max(1, held) }
    process.stdout.write(`bench: live memory: ${held} idle ${mode} clients, RSS ${beforeMb.toFixed(1)} -> ${openMb.toFixed(1)} MB (${result.perConnectionKb.toFixed(1)} KB each), ${afterCloseMb.toFixed(1)} MB after closing\n`)
    return result
  } finally {
    await fleet.stop()
  }
}

export async function runMemory (session: LiveSession): Promise<MemoryReport> {
  const report: MemoryReport = { key: MEMORY_KEY, name: `Memory, ${MEMORY_CONNECTIONS.toLocaleString('en-US')} idle SSE streams`, idle: [], problems: [] }
  // SSE only: VmRSS does not shrink back after the streams close, so a second measurement in the same
  // service would start from memory the first left; a held long-poll's own figure is its delivery row's.
  report.idle.push(await idle(session, 'sse', MEMORY_CONNECTIONS, report.problems))
  return report
}
