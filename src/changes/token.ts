import { InvalidSyncTokenError } from '../errors.js'

// The `next` of delta sync (CONTRACT 12), opaque to clients. Two kinds:
// - snapshot: the initial copy is being listed in id order; `after` is the last id sent, and
//   `watermark` the oldest transaction running when the copy began: every change the copy may have
//   missed was written by a transaction at or above it.
// - changes: every log entry below (`xid`, `id`) has been sent; (`xid`, 0) means every entry of a
//   transaction below `xid`.
// Both carry the epoch they were issued in (a TRUNCATE starts a new one), when they were issued, and
// where in the database's history the answer was read (CONTRACT 14): its timeline and a WAL position
// past every commit it showed. After a failover that lost commits, a token from past the new
// primary's branch point showed rows that no longer exist, and expires.
// Transaction ids are decimal strings: xid8 is 64 bits, beyond a JavaScript number.

export interface SnapshotPosition { kind: 'snapshot', watermark: string, after: number }
export interface ChangesPosition { kind: 'changes', xid: string, id: number }
export type SyncPosition = SnapshotPosition | ChangesPosition

/** Where in the database's history an answer was read: src/db/failover/history.ts. */
export interface HistoryPoint { timeline: number, lsn: bigint }

export interface SyncToken {
  epoch: string
  /** Milliseconds since the epoch when the answer that carried it was made. */
  issuedAt: number
  position: SyncPosition
  /** Where in the database's history the answer that carried it was read. */
  point: HistoryPoint
}

const VERSION = '2'
const MAX_XID8 = 2n ** 64n - 1n
const MAX_ID = 2n ** 63n - 1n
const MAX_TIMELINE = 2 ** 32 - 1
// Version 1 tokens, issued before tokens named their history, stand at an unknown position of
// timeline 1: held on it, expired on any later one.
// The issue time comes last in both: a digit appended to a token (base64url can decode one more
// byte from one more character) makes it a time in the future, which is refused, not another position.
const SHAPE = /^(?:1\.([sc])\.(\d{1,20})\.(\d{1,20})\.(\d{1,19})\.(\d{1,16})|2\.([sc])\.(\d{1,20})\.(\d{1,20})\.(\d{1,19})\.(\d{1,10})\.(\d{1,20})\.(\d{1,16}))$/
const UNKNOWN_V1: HistoryPoint = { timeline: 1, lsn: MAX_XID8 }
// Far above any real token (some 80 characters), so length alone never decides what is malformed.
export const MAX_SYNC_TOKEN_LENGTH = 1024

export function encodeSyncToken (token: SyncToken): string {
  const { position } = token
  const fields = position.kind === 'snapshot'
    ? ['s', token.epoch, position.watermark, String(position.after)]
    : ['c', token.epoch, position.xid, String(position.id)]
  return Buffer.from([VERSION, ...fields, String(token.point.timeline), token.point.lsn.toString(), String(token.issuedAt)].join('.')).toString('base64url')
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
  const v1 = match[1] !== undefined
  const [kind, epoch = '', xid = '', id = '', issued = '', timeline = '', lsn = ''] = v1
    ? match.slice(1, 6)
    : [...match.slice(6, 10), match[12], match[10], match[11]]
  if (!within(epoch, MAX_ID) || !within(xid, MAX_XID8) || !within(id, MAX_ID)) throw new InvalidSyncTokenError()
  if (!v1 && (Number(timeline) < 1 || Number(timeline) > MAX_TIMELINE || !within(lsn, MAX_XID8))) throw new InvalidSyncTokenError()
  const issuedAt = Number(issued)
  if (!Number.isSafeInteger(issuedAt) || BigInt(id) > BigInt(Number.MAX_SAFE_INTEGER)) throw new InvalidSyncTokenError()
  const clean = (digits: string) => BigInt(digits).toString()
  const position: SyncPosition = kind === 's'
    ? { kind: 'snapshot', watermark: clean(xid), after: Number(id) }
    : { kind: 'changes', xid: clean(xid), id: Number(id) }
  const point = v1 ? UNKNOWN_V1 : { timeline: Number(timeline), lsn: BigInt(lsn) }
  return { epoch: clean(epoch), issuedAt, position, point }
}

/** A position as a map key, with the answer size: the initial copy's start when there is none. */
export function positionKey (epoch: string | undefined, position: SyncPosition | undefined, limit: number): string {
  if (epoch === undefined || position === undefined) return `copy.${limit}`
  return position.kind === 'snapshot'
    ? `${epoch}.s.${position.watermark}.${position.after}.${limit}`
    : `${epoch}.c.${position.xid}.${position.id}.${limit}`
}
