/** What a child server wrote to its log file: its last lines, its size, and the errors after a point. */
import { closeSync, openSync, readFileSync, readSync, statSync } from 'node:fs'

export function logTail (log: string | undefined): string {
  if (log === undefined) return ''
  try {
    return readFileSync(log, 'utf8').trim().split('\n').slice(-15).join('\n')
  } catch {
    return ''
  }
}

export function logSize (log: string): number {
  try {
    return statSync(log).size
  } catch {
    return 0
  }
}

/**
 * The lines of level error or fatal (pino's 50 and 60) a server logged after byte `from`. Load shedding's
 * summaries are not among them: a shed answer (503 with Retry-After) is counted by the row as shed, not as a failure.
 * Read a mebibyte at a time: at LOG_LEVEL=info a row writes a line per request, tens of megabytes.
 */
export function errorLines (log: string, from: number): string[] {
  const found: string[] = []
  let fd: number
  try {
    fd = openSync(log, 'r')
  } catch {
    return found
  }
  try {
    const chunk = Buffer.alloc(1 << 20)
    let position = from
    let partial = ''
    for (;;) {
      const read = readSync(fd, chunk, 0, chunk.length, position)
      if (read === 0) break
      position += read
      const lines = (partial + chunk.toString('utf8', 0, read)).split('\n')
      partial = lines.pop() ?? ''
      for (const line of lines) if (/"level":(50|60)\b/.test(line)) found.push(line)
    }
    if (/"level":(50|60)\b/.test(partial)) found.push(partial)
  } finally {
    closeSync(fd)
  }
  return found
}
