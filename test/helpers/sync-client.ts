import { performance } from 'node:perf_hooks'
import type { App } from '../../src/app.js'
import { setTimeout as sleep } from 'node:timers/promises'
import { isoSql, lit, rawRows } from './exactness.js'

// A delta-sync client as CONTRACT 12 describes one: it starts without `since`, applies every answer in
// order (upsert stores the message by id, delete drops the id), and calls again with `next`, while
// `hasMore` is true and then to poll. Every answer is checked for its exact shape; anything else throws.

export interface SyncMessage {
  id: number
  content: string
  subject: string | null
  priority: string
  author: { id: number, name: string | null }
  createdAt: string
}

/** One call: when it began and ended (performance.now()), what it said and how much it carried. */
export interface SyncAnswer {
  call: number
  startedAt: number
  endedAt: number
  hasMore: boolean
  upserts: number
  deletes: number
}

const ANSWER_KEYS = '["data","next","hasMore"]'
const UPSERT_KEYS = '["op","id","message"]'
const DELETE_KEYS = '["op","id"]'
const MESSAGE_KEYS = '["id","content","subject","priority","author","createdAt"]'
const AUTHOR_KEYS = '["id","name"]'

export class SyncClient {
  /** The offline copy: every message the client holds, by id. */
  readonly copy = new Map<number, SyncMessage>()
  /** The `next` of the last answer; undefined before the first. */
  next: string | undefined
  calls = 0
  upserts = 0
  deletes = 0
  /** The last answer that said `hasMore: false`. */
  lastCaughtUp: SyncAnswer | undefined

  constructor (private readonly app: App, readonly limit: number) {}

  /** One GET /v2/messages/changes with the last `next`, applied to the copy. */
  async call (): Promise<SyncAnswer> {
    const query = new URLSearchParams({ limit: String(this.limit) })
    if (this.next !== undefined) query.set('since', this.next)
    const url = `/v2/messages/changes?${query.toString()}`
    const call = ++this.calls
    const startedAt = performance.now()
    const res = await this.app.inject({ method: 'GET', url })
    const endedAt = performance.now()
    if (res.statusCode !== 200) throw new Error(`call ${call}: GET ${url}: ${res.statusCode} ${res.body}`)
    if (res.headers['cache-control'] !== 'no-store') throw new Error(`call ${call}: cache-control ${String(res.headers['cache-control'])}`)
    const body = res.json() as { data: unknown[], next: unknown, hasMore: unknown }
    const problem = (what: string): Error => new Error(`call ${call}: ${what} in ${res.body.slice(0, 2000)}`)
    if (JSON.stringify(Object.keys(body)) !== ANSWER_KEYS) throw problem('top-level keys')
    if (typeof body.next !== 'string' || body.next === '') throw problem('next')
    if (typeof body.hasMore !== 'boolean') throw problem('hasMore')
    if (!Array.isArray(body.data) || body.data.length > this.limit) throw problem(`data (limit ${this.limit})`)
    let upserts = 0
    let deletes = 0
    for (const raw of body.data) {
      const entry = raw as { op: unknown, id: unknown, message?: SyncMessage }
      if (!Number.isSafeInteger(entry.id)) throw problem(`id ${String(entry.id)}`)
      const id = entry.id as number
      if (entry.op === 'upsert') {
        const m = entry.message
        if (JSON.stringify(Object.keys(entry)) !== UPSERT_KEYS || m === undefined ||
          JSON.stringify(Object.keys(m)) !== MESSAGE_KEYS || JSON.stringify(Object.keys(m.author)) !== AUTHOR_KEYS || m.id !== id) {
          throw problem(`upsert ${id}`)
        }
        this.copy.set(id, m)
        upserts++
      } else if (entry.op === 'delete') {
        if (JSON.stringify(Object.keys(entry)) !== DELETE_KEYS) throw problem(`delete ${id}`)
        this.copy.delete(id)
        deletes++
      } else {
        throw problem(`op ${String(entry.op)}`)
      }
    }
    this.next = body.next
    this.upserts += upserts
    this.deletes += deletes
    const answer = { call, startedAt, endedAt, hasMore: body.hasMore, upserts, deletes }
    if (!answer.hasMore) this.lastCaughtUp = answer
    return answer
  }

  /**
   * Whether an answer said `hasMore: false` to a call that began after `mark` (performance.now()):
   * the client has caught up with everything the feed may answer of what committed before `mark`.
   */
  caughtUpAfter (mark: number): boolean {
    return this.lastCaughtUp !== undefined && this.lastCaughtUp.startedAt > mark
  }

  /** Calls until an answer to a call that began after `mark` says `hasMore: false`; returns the calls made. */
  async syncAfter (mark: number, maxCalls = 200_000): Promise<number> {
    for (let n = 1; n <= maxCalls; n++) {
      const answer = await this.call()
      if (!answer.hasMore && answer.startedAt > mark) return n
    }
    throw new Error(`no hasMore:false within ${maxCalls} calls`)
  }

  /** The copy, in id order. */
  sorted (): SyncMessage[] {
    return [...this.copy.values()].sort((a, b) => a.id - b.id)
  }
}

/** Every message as GET /v2/messages/{id} renders it, built from SQL, in id order. */
export async function messagesAsServed (app: App): Promise<SyncMessage[]> {
  const rows = await rawRows<{ id: number, content: string, subject: string | null, priority: string, author_id: number, author_name: string | null, created_at: string }>(app,
    `SELECT m.id::float8 AS id, m.content, m.subject, m.priority::text AS priority, u.id::float8 AS author_id, u.name AS author_name,
            ${isoSql('m.created_at')} AS created_at
       FROM messages m JOIN users u ON u.id = m.author_id ORDER BY m.id`)
  return rows.map((r) => ({
    id: Number(r.id),
    content: r.content,
    subject: r.subject,
    priority: r.priority,
    author: { id: Number(r.author_id), name: r.author_name },
    createdAt: r.created_at
  }))
}

/** Where the copy differs from the table: ids missing from it, ids it holds that are gone, rows that differ. */
export function differences (copy: SyncMessage[], table: SyncMessage[]): { missing: number[], extra: number[], differ: number[] } {
  const held = new Map(copy.map((m) => [m.id, m]))
  const present = new Map(table.map((m) => [m.id, m]))
  return {
    missing: table.filter((m) => !held.has(m.id)).map((m) => m.id),
    extra: copy.filter((m) => !present.has(m.id)).map((m) => m.id),
    differ: table.filter((m) => held.has(m.id) && JSON.stringify(held.get(m.id)) !== JSON.stringify(m)).map((m) => m.id)
  }
}

const QUIESCE_MS = 60_000

/**
 * Waits until every write transaction that may have begun before this moment has ended, in the whole
 * cluster: the oldest one running is younger than a transaction id taken now. The feed's watermark is
 * the cluster's oldest running transaction, so one in another database (another test file's) holds it
 * back too; a test that expects a change in its next answer waits for this first.
 */
export async function quiesce (app: App): Promise<void> {
  await quiesceOn(async (text) => await rawRows(app, text))
}

/** `quiesce` through any way of running a statement on the test's database (a server process's, say). */
export async function quiesceOn (query: <T extends Record<string, unknown>>(text: string) => Promise<T[]>): Promise<void> {
  const [row] = await query<{ x: string }>('SELECT pg_current_xact_id()::text AS x')
  const start = performance.now()
  for (;;) {
    const [done] = await query<{ ended: boolean }>(`SELECT pg_snapshot_xmin(pg_current_snapshot()) > ${lit(row!.x)}::xid8 AS ended`)
    if (done?.ended === true) return
    if (performance.now() - start > QUIESCE_MS) throw new Error(`a transaction older than xid ${row!.x} is still running after ${QUIESCE_MS} ms`)
    await sleep(10)
  }
}
