import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { Agent, request } from 'undici'
import { PHASES, type Failure, type Phase } from './load.js'

// Live clients of GET /v2/messages/changes (CONTRACT 13) held open through the balancer for the whole
// check: Server-Sent Events read as an EventSource reads them, and long-polls. Each keeps its own copy
// of `messages`, applying every answer in order; at the end every copy must equal the table, and every
// message the load created must have reached every client.

export type LiveKind = 'sse' | 'long-poll'

export interface LivePhase {
  /** Client × message deliveries of the messages the load created in this phase. */
  delivered: number
  /** Client × message: created in this phase and never delivered to that client. */
  lost: number
  /** Streams reopened with Last-Event-ID after they ended or failed. */
  sseReconnects: number
  /** Long-polls sent again after a network error or a refusal (429, 5xx). */
  longPollRetries: number
  /**
   * From the 201 the writer received to the receipt, in ms, one per delivery (0 when it came first);
   * only once the client holds its copy (a client loading its initial copy receives later what is
   * created meanwhile).
   */
  sseDelays: number[]
  longPollDelays: number[]
}

export interface LiveResult {
  sse: number
  longPolls: number
  /** Answers (events or long-poll bodies) applied, all clients together. */
  answers: number
  phases: Record<Phase, LivePhase>
  /** Clients whose copy equals `messages` once the load had stopped. */
  equal: number
  /** A line per client whose copy differs, with its first differences. */
  mismatched: string[]
  /** Some lost deliveries, `client: id`. */
  lostExamples: string[]
  /** Times a client was answered 410 and copied again from the start. */
  resyncs: number
  /** Live requests refused or failed: a status other than 200, JSON where a stream was asked, a network error, a silent stream. */
  refused: Failure[]
}

export interface LiveOptions {
  /** The balancer's address. */
  base: string
  sse: number
  longPolls: number
  phase: () => Phase
  /** Where the clients start: a copy of `messages` and the token that follows it (initialCopy). */
  start: Start
  /** Of each kind, how many start without a position and load the initial copy themselves. */
  fromScratch: number
}

export interface Start { copy: Map<number, string>, token: string }

// A long-poll waits this long for a change; the load writes several a second, so holds are short
// until the load stops.
const WAIT_S = 20
// A held long-poll is answered within WAIT_S; past this the answer is taken as lost and re-sent.
const LONG_POLL_TIMEOUT_MS = (WAIT_S + 15) * 1000
// Heartbeats come every LIVE_HEARTBEAT_S (15 s): a stream silent for three of them is reopened.
const STREAM_IDLE_MS = 45_000
// An EventSource reconnects after `retry` ms; this is the pause when the server names none.
const RECONNECT_MS = 250
const MAX_REFUSED = 50

interface ChangesBody { data: Array<{ op: 'upsert', id: number, message: Message } | { op: 'delete', id: number }>, next: string, hasMore: boolean }
interface Message { id: number, content: string, subject: string | null, priority: string, author: { id: number, name: string | null }, createdAt: string }

/** A message reduced to what the table is compared on, as a string (tableCopy renders the same). */
const fingerprint = (m: Message): string => JSON.stringify([m.id, m.content, m.subject, m.priority, m.author.id, m.author.name, m.createdAt])

/** Every row of `messages` as fingerprint renders a message, read by SQL. */
export async function tableCopy (databaseUrl: string): Promise<Map<number, string>> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    const rows = await sql<Array<{ id: number, f: string }>>`
      SELECT m.id::float8 AS id, json_build_array(m.id, m.content, m.subject, m.priority, m.author_id, u.name,
        to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text AS f
      FROM messages m JOIN users u ON u.id = m.author_id`
    // json_build_array's spacing is not JSON.stringify's: parse and write again.
    return new Map(rows.map((r) => [r.id, JSON.stringify(JSON.parse(r.f))]))
  } finally {
    await sql.end()
  }
}

/** The initial copy by plain polls (no `since`, then each `next` while hasMore), as every client would start. */
export async function initialCopy (base: string): Promise<Start> {
  const copy = new Map<number, string>()
  let token: string | undefined
  for (;;) {
    const query = token === undefined ? 'limit=1000' : `limit=1000&since=${encodeURIComponent(token)}`
    const response = await request(`${base}/v2/messages/changes?${query}`, { headersTimeout: 30_000, bodyTimeout: 30_000 })
    const text = await response.body.text()
    if (response.statusCode !== 200) throw new Error(`initial copy: ${response.statusCode} ${text.slice(0, 200)}`)
    const body = JSON.parse(text) as ChangesBody
    for (const change of body.data) {
      if (change.op === 'upsert') copy.set(change.id, fingerprint(change.message))
      else copy.delete(change.id)
    }
    token = body.next
    if (!body.hasMore) return { copy, token }
  }
}

/** A client's copy: the shared start, read only, under the changes this client applied. */
class Copy {
  private readonly mine = new Map<number, string | null>()
  constructor (private readonly start: Map<number, string>) {}

  apply (body: ChangesBody): number[] {
    const upserted: number[] = []
    for (const change of body.data) {
      if (change.op === 'upsert') {
        this.mine.set(change.id, fingerprint(change.message))
        upserted.push(change.id)
      } else {
        this.mine.set(change.id, null)
      }
    }
    return upserted
  }

  private get (id: number): string | null | undefined {
    return this.mine.has(id) ? this.mine.get(id) : this.start.get(id)
  }

  /** How this copy differs from `table` (at most `limit` lines); [] when it equals it. */
  differences (table: Map<number, string>, limit = 3): string[] {
    const out: string[] = []
    for (const [id, expected] of table) {
      if (out.length >= limit) return out
      const held = this.get(id)
      if (held === undefined || held === null) out.push(`missing ${id}`)
      else if (held !== expected) out.push(`${id} differs`)
    }
    for (const id of new Set([...this.start.keys(), ...this.mine.keys()])) {
      if (out.length >= limit) return out
      const held = this.get(id)
      if (held !== undefined && held !== null && !table.has(id)) out.push(`extra ${id}`)
    }
    return out
  }
}

/** Server-Sent Events as an EventSource parses them: fields per line, an event ends at a blank line. */
export class EventParser {
  private buffer = ''
  private data: string[] = []
  private id: string | undefined
  private event = ''
  retry: number | undefined

  constructor (private readonly onEvent: (event: { id: string | undefined, event: string, data: string }) => void) {}

  push (chunk: string): void {
    this.buffer += chunk
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/)
      if (end < 0) return
      const line = this.buffer.slice(0, end)
      this.buffer = this.buffer.slice(end + (this.buffer.startsWith('\r\n', end) ? 2 : 1))
      this.line(line)
    }
  }

  private line (line: string): void {
    if (line === '') {
      if (this.data.length > 0) this.onEvent({ id: this.id, event: this.event === '' ? 'message' : this.event, data: this.data.join('\n') })
      this.data = []
      this.event = ''
      return
    }
    if (line.startsWith(':')) return
    const colon = line.indexOf(':')
    const field = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'data') this.data.push(value)
    else if (field === 'event') this.event = value
    else if (field === 'id' && !value.includes('\0')) this.id = value
    else if (field === 'retry' && /^\d+$/.test(value)) this.retry = Number(value)
  }
}

interface Client {
  name: string
  kind: LiveKind
  copy: Copy
  /** When each message first reached this client (performance.now()). */
  received: Map<number, number>
  /** When it first held a complete copy (an answer with hasMore false); 0 for a client started from one. */
  caughtUpAt: number | undefined
  fatal: string | undefined
  stop: () => void
  stopped: Promise<void>
}

/**
 * Starts the live clients. `created` is the load's hook for each 201; `stop` waits until every copy
 * equals `messages` as read by SQL (or `settleMs` passed), closes every client and reports.
 */
export function startLiveClients (options: LiveOptions): {
  ready: Promise<void>
  created: (id: number, phase: Phase) => void
  stop: (databaseUrl: string, settleMs: number) => Promise<LiveResult>
  close: () => Promise<void>
} {
  const phases = Object.fromEntries(PHASES.map((p) => [p, { delivered: 0, lost: 0, sseReconnects: 0, longPollRetries: 0, sseDelays: [], longPollDelays: [] }])) as unknown as Record<Phase, LivePhase>
  const creations: Array<{ id: number, phase: Phase, at: number }> = []
  const refused: Failure[] = []
  const clients: Client[] = []
  const opened: Array<Promise<void>> = []
  let answers = 0
  let closing = false
  const empty = new Map<number, string>()
  // Clients that were answered 410 and copied again from the start.
  let resyncs = 0

  const refuse = (client: Client, what: string, outcome: string): void => {
    if (refused.length < MAX_REFUSED) refused.push({ phase: options.phase(), what: `${client.name} ${what}`, outcome })
  }

  const apply = (client: Client, body: ChangesBody): void => {
    answers++
    const at = performance.now()
    for (const id of client.copy.apply(body)) {
      if (!client.received.has(id)) client.received.set(id, at)
    }
    if (!body.hasMore) client.caughtUpAt ??= at
  }

  function sseClient (index: number, scratch: boolean): Client {
    const path = scratch ? '/v2/messages/changes' : `/v2/messages/changes?since=${encodeURIComponent(options.start.token)}`
    const client: Client = { name: `sse-${index}`, kind: 'sse', copy: new Copy(scratch ? empty : options.start.copy), received: new Map(), caughtUpAt: scratch ? undefined : 0, fatal: undefined, stop: () => {}, stopped: Promise.resolve() }
    let lastEventId: string | undefined
    let retryMs = RECONNECT_MS
    let current: ClientRequest | undefined
    let signalOpen: () => void = () => {}
    opened.push(new Promise((resolve) => { signalOpen = resolve }))

    // One connection: resolves when it has ended, however it ended.
    const connect = async (): Promise<void> => await new Promise((resolve) => {
      const headers: Record<string, string> = { accept: 'text/event-stream' }
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId
      let done = false
      const finish = (): void => { if (!done) { done = true; resolve() } }
      const req = httpRequest(options.base + path, { headers, agent: false })
      current = req
      req.setTimeout(STREAM_IDLE_MS, () => { refuse(client, 'stream', `no byte for ${STREAM_IDLE_MS} ms`); req.destroy() })
      req.on('error', finish)
      req.on('close', finish)
      req.on('response', (res: IncomingMessage) => {
        const type = String(res.headers['content-type'] ?? '')
        if (res.statusCode !== 200 || !type.startsWith('text/event-stream')) {
          let text = ''
          res.setEncoding('utf8')
          res.on('data', (chunk: string) => { text += chunk })
          res.on('end', () => {
            const status = res.statusCode ?? 0
            refuse(client, 'stream', `${status} ${type} ${text.slice(0, 120)}`)
            // 429 and 503 ask to come back later; 410 to copy again from the start (as docs/clients.md says a
            // client does); anything else (400, a JSON 200) an EventSource does not retry, and this
            // client stops with its copy as it is.
            if (status === 429 || status === 503) retryMs = Math.max(RECONNECT_MS, 1000 * (Number(res.headers['retry-after']) || 1))
            else if (status === 410) {
              client.copy = new Copy(empty)
              lastEventId = undefined
              resyncs++
            } else client.fatal = `${status} ${type}`
            finish()
          })
          res.on('error', finish)
          return
        }
        signalOpen()
        const parser = new EventParser((event) => {
          if (event.event !== 'changes') return
          let body: ChangesBody
          try {
            body = JSON.parse(event.data) as ChangesBody
          } catch {
            refuse(client, 'stream', `an event that is not JSON: ${event.data.slice(0, 120)}`)
            client.fatal = 'a malformed event'
            req.destroy()
            return
          }
          apply(client, body)
          lastEventId = event.id
        })
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          parser.push(chunk)
          if (parser.retry !== undefined) retryMs = parser.retry
        })
        res.on('end', finish)
        res.on('error', finish)
        res.on('aborted', finish)
      })
      req.end()
    })

    client.stopped = (async () => {
      for (;;) {
        retryMs = RECONNECT_MS
        await connect()
        if (closing || client.fatal !== undefined) return
        phases[options.phase()].sseReconnects++
        await sleep(retryMs)
        if (closing) return
      }
    })()
    client.stop = () => { current?.destroy() }
    return client
  }

  function longPollClient (index: number, scratch: boolean): Client {
    const client: Client = { name: `long-poll-${index}`, kind: 'long-poll', copy: new Copy(scratch ? empty : options.start.copy), received: new Map(), caughtUpAt: scratch ? undefined : 0, fatal: undefined, stop: () => {}, stopped: Promise.resolve() }
    const agent = new Agent({ connections: 1, keepAliveTimeout: 10_000 })
    const abort = new AbortController()
    let since = scratch ? undefined : options.start.token

    client.stopped = (async () => {
      // `closing` is set by close(), from outside this loop.
      for (;;) {
        if (closing) break
        const query = since === undefined ? '' : `?since=${encodeURIComponent(since)}&wait=${WAIT_S}`
        let pause = 0
        try {
          const response = await request(`${options.base}/v2/messages/changes${query}`, {
            dispatcher: agent,
            signal: abort.signal,
            headersTimeout: LONG_POLL_TIMEOUT_MS,
            bodyTimeout: LONG_POLL_TIMEOUT_MS
          })
          const text = await response.body.text()
          if (response.statusCode === 200) {
            let body: ChangesBody
            try {
              body = JSON.parse(text) as ChangesBody
            } catch {
              refuse(client, 'poll', `200 that is not JSON: ${text.slice(0, 120)}`)
              client.fatal = 'a malformed answer'
              break
            }
            apply(client, body)
            since = body.next
            continue
          }
          refuse(client, 'poll', `${response.statusCode} ${text.slice(0, 120)}`)
          if (response.statusCode === 410) {
            client.copy = new Copy(empty)
            since = undefined
            resyncs++
            continue
          }
          if (response.statusCode !== 429 && response.statusCode < 500) {
            client.fatal = String(response.statusCode)
            break
          }
          pause = Math.max(RECONNECT_MS, 1000 * (Number(response.headers['retry-after']) || 0))
        } catch (err) {
          if (closing) break
          refuse(client, 'poll', (err as { code?: string }).code ?? (err as Error).message)
          pause = RECONNECT_MS
        }
        phases[options.phase()].longPollRetries++
        await sleep(pause)
      }
      await agent.close().catch(() => {})
    })()
    client.stop = () => abort.abort()
    return client
  }

  async function close (): Promise<void> {
    closing = true
    for (const client of clients) client.stop()
    await Promise.all(clients.map(async (c) => await c.stopped))
  }

  for (let i = 0; i < options.sse; i++) clients.push(sseClient(i + 1, i < options.fromScratch))
  for (let i = 0; i < options.longPolls; i++) clients.push(longPollClient(i + 1, i < options.fromScratch))

  return {
    // Every stream has answered 200 (or 10 s passed): the load's first change has someone to reach.
    ready: Promise.race([Promise.all(opened).then(() => {}), sleep(10_000)]),
    created (id, phase) {
      creations.push({ id, phase, at: performance.now() })
    },
    async stop (databaseUrl, settleMs) {
      const table = await tableCopy(databaseUrl)
      const deadline = performance.now() + settleMs
      let pending = clients.filter((c) => c.fatal === undefined)
      while (pending.length > 0 && performance.now() < deadline) {
        pending = pending.filter((c) => c.fatal === undefined && c.copy.differences(table, 1).length > 0)
        if (pending.length > 0) await sleep(250)
      }
      await close()

      const mismatched: string[] = []
      const lostExamples: string[] = []
      for (const client of clients) {
        const differences = client.copy.differences(table)
        if (differences.length > 0) mismatched.push(`${client.name}: ${differences.join(', ')}${client.fatal === undefined ? '' : ` (stopped after ${client.fatal})`}`)
        for (const { id, phase, at } of creations) {
          const received = client.received.get(id)
          const stats = phases[phase]
          if (received === undefined) {
            stats.lost++
            if (lostExamples.length < 20) lostExamples.push(`${client.name}: ${id} (${phase})`)
            continue
          }
          stats.delivered++
          if (client.caughtUpAt === undefined || at < client.caughtUpAt) continue
          ;(client.kind === 'sse' ? stats.sseDelays : stats.longPollDelays).push(Math.max(0, received - at))
        }
      }
      return { sse: options.sse, longPolls: options.longPolls, answers, phases, equal: clients.length - mismatched.length, mismatched, lostExamples, resyncs, refused }
    },
    close
  }
}
