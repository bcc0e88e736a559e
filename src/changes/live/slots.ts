// The live limits of CONTRACT 13: held long-polls and open streams per instance
// (LIVE_MAX_CONNECTIONS) and per client address (LIVE_MAX_PER_CLIENT), so that one address cannot
// take every slot of a public endpoint.

export type SlotRefusal = 'instance' | 'client'

export interface LiveSlots {
  /** Takes a slot for `address`, or says which limit refuses it. */
  take: (address: string) => SlotRefusal | undefined
  release: (address: string) => void
  used: () => number
}

export function createLiveSlots (maxConnections: number, maxPerClient: number): LiveSlots {
  const perAddress = new Map<string, number>()
  let used = 0
  return {
    take (address) {
      if (used >= maxConnections) return 'instance'
      const held = perAddress.get(address) ?? 0
      if (held >= maxPerClient) return 'client'
      perAddress.set(address, held + 1)
      used++
      return undefined
    },
    release (address) {
      const held = perAddress.get(address) ?? 0
      if (held <= 1) perAddress.delete(address)
      else perAddress.set(address, held - 1)
      used = Math.max(0, used - 1)
    },
    used: () => used
  }
}
