import { readFile } from 'node:fs/promises'

// What the system says of each TCP connection: the bytes sent or queued that the peer has not yet
// acknowledged (Linux, /proc/net/tcp and tcp6, the `tx_queue` column of an established socket). A
// client that stops reading fills its receive window, then acknowledges nothing: that is how a stream
// whose client went quiet is told apart from one that has nothing to be sent, even when everything it
// was sent fits in the system's buffers and the process itself holds nothing unsent.

const TABLES = { 4: '/proc/self/net/tcp', 6: '/proc/self/net/tcp6' } as const
const ESTABLISHED = '01'

/** A connection as both ends know it: the local port and the peer's port. */
export const connectionKey = (localPort: number | undefined, remotePort: number | undefined): string => `${localPort ?? 0}:${remotePort ?? 0}`

/** The sockets asked about: their local ports, and whether any is an IPv6 socket (IPv4 peers of a dual-stack listener included). */
export interface Asked { localPorts: ReadonlySet<number>, ipv6: boolean, ipv4: boolean }

/**
 * Unacknowledged bytes per established connection on one of `asked.localPorts`, by connectionKey;
 * undefined where the system does not say (no /proc, another system). Two connections with one key
 * (peers on different addresses that chose the same port) are left out: neither can be told.
 */
export async function unacknowledgedBytes (asked: Asked): Promise<Map<string, number> | undefined> {
  const families = [...(asked.ipv4 ? [4] as const : []), ...(asked.ipv6 ? [6] as const : [])]
  const texts = await Promise.all(families.map(async (family) => ({ family, text: await readFile(TABLES[family], 'latin1').catch(() => undefined) })))
  if (texts.every(({ text }) => text === undefined)) return undefined
  const found = new Map<string, number>()
  const ambiguous = new Set<string>()
  for (const { family, text } of texts) {
    if (text === undefined) continue
    // "  sl: local_address rem_address st tx_queue:rx_queue ...", fixed widths after the slot number:
    // an address is 8 hex digits (32 for tcp6) and a colon and 4 for the port.
    const address = family === 4 ? 8 : 32
    let start = text.indexOf('\n') + 1
    while (start > 0 && start < text.length) {
      const end = text.indexOf('\n', start)
      const stop = end < 0 ? text.length : end
      const at = text.indexOf(': ', start) + 2
      start = stop + 1
      if (at < 2 || at >= stop) continue
      const localPort = parseInt(text.slice(at + address + 1, at + address + 5), 16)
      if (!asked.localPorts.has(localPort)) continue
      const remote = at + address + 6
      const state = remote + address + 6
      if (text.slice(state, state + 2) !== ESTABLISHED) continue
      const key = connectionKey(localPort, parseInt(text.slice(remote + address + 1, remote + address + 5), 16))
      if (found.has(key)) ambiguous.add(key)
      found.set(key, parseInt(text.slice(state + 3, state + 11), 16))
    }
  }
  for (const key of ambiguous) found.delete(key)
  return found
}
