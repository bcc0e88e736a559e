import { InvalidSyncTokenError } from '../errors.js'

// The `next` of delta sync (CONTRACT 12), opaque to clients. Two kinds:
// - snapshot: the initial copy is being listed in id order; `after` is the last id sent, and
//   `watermark` the oldest transaction running when the copy began: every change the copy may have
//   missed was written by a transaction at or above it.
// - changes: every log entry below (`xid`, `id`) has been sent; (`xid`, 0) means every entry of a
//   transaction below `xid`.
// Both carry the epoch they were issued in (a TRUNCATE starts a new one) and when they were issued.
// Transaction ids are decimal strings: xid8 is 64 bits, beyond a JavaScript number.

export interface SnapshotPosition { kind: 'snapshot', watermark: string, after: number }
export interface ChangesPosition { kind: 'changes', xid: string, id: number }
export type SyncPosition = SnapshotPosition | ChangesPosition

export interface SyncToken {
  epoch: string
  /** Milliseconds since the epoch when the answer that carried it was made. */
  issuedAt: number
  position: SyncPosition
}

const VERSION = '1'
const MAX_XID8 = 2n ** 64n - 1n
const MAX_ID = 2n ** 63n - 1n
const SHAPE = /^1\.([sc])\.(\d{1,20})\.(\d{1,20})\.(\d{1,19})\.(\d{1,16})$/
// Far above any real token (some 80 characters), so length alone never decides what is malformed.
export const MAX_SYNC_TOKEN_LENGTH = 1024

export function encodeSyncToken (token: SyncToken): string {
  const { position } = token
  const fields = position.kind === 'snapshot'
    ? ['s', token.epoch, position.watermark, String(position.after)]
    : ['c', token.epoch, position.xid, String(position.id)]
  return Buffer.from([VERSION, ...fields, String(token.issuedAt)].join('.')).toString('base64url')
}

const within = (digits: string, max: bigint) => BigInt(digits) <= max

/** The token a client sent back, or InvalidSyncTokenError (400) when it is not one this service issues. */
export function decodeSyncToken (text: string): SyncToken {
  if (text.length > MAX_SYNC_TOKEN_LENGTH || !/^[A-Za-z0-9_-]+$/.test(text)) throw new InvalidSyncTokenError()
  const raw = Buffer.from(text, 'base64url').toString('latin1')
  // base64url decoding ignores what does not fit; only the exact encoding of a token is one.
  if (Buffer.from(raw, 'latin1').toString('base64url') !== text) throw new InvalidSyncTokenError()
  const match = SHAPE.exec(raw)
  if (match === null) throw new InvalidSyncTokenError()
  const [, kind, epoch = '', xid = '', id = '', issued = ''] = match
  if (!within(epoch, MAX_ID) || !within(xid, MAX_XID8) || !within(id, MAX_ID)) throw new InvalidSyncTokenError()
  const issuedAt = Number(issued)
  if (!Number.isSafeInteger(issuedAt) || BigInt(id) > BigInt(Number.MAX_SAFE_INTEGER)) throw new InvalidSyncTokenError()
  const clean = (digits: string) => BigInt(digits).toString()
  const position: SyncPosition = kind === 's'
    ? { kind: 'snapshot', watermark: clean(xid), after: Number(id) }
    : { kind: 'changes', xid: clean(xid), id: Number(id) }
  return { epoch: clean(epoch), issuedAt, position }
}

/** A position as a map key, with the answer size: the initial copy's start when there is none. */
export function positionKey (epoch: string | undefined, position: SyncPosition | undefined, limit: number): string {
  if (epoch === undefined || position === undefined) return `copy.${limit}`
  return position.kind === 'snapshot'
    ? `${epoch}.s.${position.watermark}.${position.after}.${limit}`
    : `${epoch}.c.${position.xid}.${position.id}.${limit}`
}
