// JSON log lines reach stdout without blocking the event loop. pino's default destination makes one
// write(2) per line, so a line per request (CONTRACT 11) was a system call per request. This one has at
// most one write in flight: lines logged meanwhile are buffered and leave together in the next write,
// so under load a write carries many lines, and when idle each line is written as soon as it is logged.
// pino flushes what is buffered, synchronously, when the process exits (a crash's exit included).
import pino, { type DestinationStream } from 'pino'

export function stdoutLines (): DestinationStream {
  return pino.destination({ dest: 1, sync: false })
}
