import { readFile } from 'node:fs/promises'

// What the system says of each TCP connection: the bytes sent or queued that the peer has not yet
// acknowledged (Linux, /proc/net/tcp and tcp6, the `tx_queue` column of an established socket). A
// client that stops reading fills its receive window, then acknowledges nothing: that is how a stream
// whose client went quiet is told apart from one that has nothing to be sent, even when everything it
// was sent fits in the system's buffers and the process itself holds nothing unsent.

const TABLES = ['/proc/self/net/tcp', '/proc/self/net/tcp6']
const ESTABLISHED = '01'

/** A connection as both ends know it: the local port and the peer's port. */
export const connectionKey = (localPort: number | undefined, remotePort: number | undefined): string => `${localPort ?? 0}:${remotePort ?? 0}`

/**
 * Unacknowledged bytes per established connection, by connectionKey; undefined where the system does
 * not say (no /proc, another system). Two connections with one key (peers on different addresses
 * that chose the same port) are left out: neither can be told.
 */
export async function unacknowledgedBytes (): Promise<Map<string, number> | undefined> {
  const texts = await Promise.all(TABLES.map(async (path) => await readFile(path, 'latin1').catch(() => undefined)))
  if (texts.every((text) => text === undefined)) return undefined
  const found = new Map<string, number>()
  const ambiguous = new Set<string>()
  for (const text of texts) {
    if (text === undefined) continue
    let start = text.indexOf('\n') + 1
    while (start > 0 && start < text.length) {
      const end = text.indexOf('\n', start)
      const line = text.slice(start, end < 0 ? text.length : end)
      start = end < 0 ? text.length : end + 1
      // "sl local_address rem_address st tx_queue:rx_queue ..."; addresses end in ":<port, hex>".
      const [, local, remote, state, queues] = line.trim().split(/\s+/, 5)
      if (state !== ESTABLISHED || local === undefined || remote === undefined || queues === undefined) continue
      const key = connectionKey(parseInt(local.slice(local.lastIndexOf(':') + 1), 16), parseInt(remote.slice(remote.lastIndexOf(':') + 1), 16))
      if (found.has(key)) ambiguous.add(key)
      found.set(key, parseInt(queues.slice(0, queues.indexOf(':')), 16))
    }
  }
  for (const key of ambiguous) found.delete(key)
  return found
}
