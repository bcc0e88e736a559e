import { setTimeout as sleep } from 'node:timers/promises'
import { Agent, request } from 'undici'

// The rolling-restart check's phases, then the failover check's (scripts/failover/main.ts).
export const PHASES = ['warmup', 'rest', 'rolling', 'crash', 'before', 'gap', 'after'] as const
export type Phase = typeof PHASES[number]

export interface Sample { phase: Phase, kind: 'read' | 'post', ms: number }

export interface Failure { phase: Phase, what: string, outcome: string }

/**
 * One answer the client got (each POST attempt is one): its status, or the network error's code;
 * the phase current when it was sent; when it arrived (performance.now()) and how long it took.
 */
export interface Answer {
  phase: Phase
  kind: 'read' | 'post'
  path: string
  status: number | string
  body: unknown
  at: number
  ms: number
}

export interface LoadOptions {
  /** The balancer's address. */
  base: string
  /** Requests started per second, all workers together. */
  rate: number
  workers: number
  /** Bearer tokens of the callers who POST; worker i uses token i modulo their number. */
  tokens: string[]
  /** Ids known to exist, for by-id reads; acknowledged creations are added as they come. */
  ids: number[]
  /** Prefix of every Idempotency-Key, unique to the run. */
  keyPrefix: string
  /** The phase a request belongs to is the one current when it starts. */
  phase: () => Phase
  /** Told of each acknowledged creation as its 201 arrives (the live clients time their receipt from it). */
  onCreated?: (id: number, phase: Phase) => void
  /** Told of every answer, each POST attempt included. */
  onAnswer?: (answer: Answer) => void
}

export interface LoadResult {
  reads: number
  failedReads: Failure[]
  /** Every Idempotency-Key sent, acknowledged or not. */
  sentKeys: Set<string>
  /** Acknowledged keys and the message id their 201 named. */
  acked: Map<string, number>
  givenUp: Failure[]
  /** POST attempts after the first, made by the client. */
  clientRetries: number
  /** 201s answered with Idempotent-Replayed: true. */
  replayed: number
  samples: Sample[]
}

// A mobile client's policy: at most three retries of the same request with the same key, after a
// growing pause, or the server's Retry-After when it gives one.
const MAX_RETRIES = 3
const BACKOFF_MS = [250, 500, 1000]
// Above SHUTDOWN_GRACE_MS, so a request a draining instance is finishing is never cut short here.
const REQUEST_TIMEOUT_MS = 15_000
const SORTS = ['id', 'createdAt', 'subject']
const SEARCH_TERMS = ['quokka', 'aurora', 'zeppelin']

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T
const sortedQuery = (): string => `sort=${pick(SORTS)}&order=${Math.random() < 0.5 ? 'asc' : 'desc'}`

interface Read { what: string, check: (status: number, body: unknown) => boolean }

const isPage = (status: number, body: unknown): boolean =>
  status === 200 && typeof body === 'object' && body !== null && Array.isArray((body as { data?: unknown }).data)

function nextRead (ids: number[]): Read {
  const roll = Math.random()
  if (roll < 0.45) return { what: `/v2/messages?page=${1 + Math.floor(Math.random() * 40)}&limit=25&${sortedQuery()}`, check: isPage }
  if (roll < 0.65) return { what: `/v2/messages/search?q=${pick(SEARCH_TERMS)}&page=${1 + Math.floor(Math.random() * 3)}`, check: isPage }
  const id = pick(ids)
  return { what: `/v2/messages/${id}`, check: (status, body) => status === 200 && (body as { id?: unknown }).id === id }
}

/**
 * A steady mixed load through the balancer: list pages in every sort, search, by-id reads and POSTs
 * with an Idempotency-Key, paced to `rate`. A read is made once: whatever the client sees is the
 * answer. A POST is retried by the client on a network error or a 5xx (and on 409, as that status
 * asks), with the same key and body.
 */
export function startLoad (options: LoadOptions): { stop: () => Promise<LoadResult> } {
  const agent = new Agent({ connections: options.workers, keepAliveTimeout: 10_000 })
  const result: LoadResult = { reads: 0, failedReads: [], sentKeys: new Set(), acked: new Map(), givenUp: [], clientRetries: 0, replayed: 0, samples: [] }
  const control = { stopped: false }
  let keys = 0

  async function send (method: 'GET' | 'POST', path: string, headers: Record<string, string>, body?: string): Promise<{ status: number, headers: Record<string, unknown>, body: unknown }> {
    const response = await request(options.base + path, {
      method,
      headers,
      body,
      dispatcher: agent,
      headersTimeout: REQUEST_TIMEOUT_MS,
      bodyTimeout: REQUEST_TIMEOUT_MS
    })
    const text = await response.body.text()
    let parsed: unknown = text
    try { parsed = JSON.parse(text) } catch {}
    return { status: response.statusCode, headers: response.headers, body: parsed }
  }

  async function read (): Promise<void> {
    const phase = options.phase()
    const { what, check } = nextRead(options.ids)
    const started = performance.now()
    let outcome: string | undefined
    try {
      const response = await send('GET', what, {})
      options.onAnswer?.({ phase, kind: 'read', path: what, status: response.status, body: response.body, at: performance.now(), ms: performance.now() - started })
      if (!check(response.status, response.body)) outcome = `${response.status} ${JSON.stringify(response.body).slice(0, 120)}`
    } catch (err) {
      outcome = (err as { code?: string }).code ?? (err as Error).message
      options.onAnswer?.({ phase, kind: 'read', path: what, status: outcome, body: undefined, at: performance.now(), ms: performance.now() - started })
    }
    result.reads++
    result.samples.push({ phase, kind: 'read', ms: performance.now() - started })
    if (outcome !== undefined) result.failedReads.push({ phase, what: `GET ${what}`, outcome })
  }

  async function post (token: string): Promise<void> {
    const phase = options.phase()
    const key = `${options.keyPrefix}-${++keys}`
    const body = JSON.stringify({ subject: 'Rolling restart', content: `rolling-restart ${key}` })
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key }
    result.sentKeys.add(key)
    const started = performance.now()
    let outcome = ''
    for (let attempt = 0; attempt <= MAX_RETRIES; attempt++) {
      if (attempt > 0) result.clientRetries++
      let pause = BACKOFF_MS[attempt] ?? 1000
      const attemptPhase = options.phase()
      const attemptStarted = performance.now()
      try {
        const response = await send('POST', '/v2/messages', headers, body)
        options.onAnswer?.({ phase: attemptPhase, kind: 'post', path: key, status: response.status, body: response.body, at: performance.now(), ms: performance.now() - attemptStarted })
        if (response.status === 201) {
          const id = (response.body as { id?: unknown }).id
          if (typeof id !== 'number') { outcome = `201 without an id: ${JSON.stringify(response.body).slice(0, 120)}`; break }
          result.acked.set(key, id)
          options.onCreated?.(id, phase)
          options.ids.push(id)
          if (response.headers['idempotent-replayed'] === 'true') result.replayed++
          result.samples.push({ phase, kind: 'post', ms: performance.now() - started })
          return
        }
        outcome = `${response.status} ${JSON.stringify(response.body).slice(0, 120)}`
        if (response.status < 500 && response.status !== 409) break
        const retryAfter = Number(response.headers['retry-after'])
        if (Number.isFinite(retryAfter) && retryAfter > 0) pause = Math.max(pause, retryAfter * 1000)
      } catch (err) {
        outcome = (err as { code?: string }).code ?? (err as Error).message
        options.onAnswer?.({ phase: attemptPhase, kind: 'post', path: key, status: outcome, body: undefined, at: performance.now(), ms: performance.now() - attemptStarted })
      }
      if (attempt < MAX_RETRIES) await sleep(pause)
    }
    result.givenUp.push({ phase, what: `POST /v2/messages (Idempotency-Key ${key})`, outcome })
  }

  // Each worker starts its next request at its own fixed pace; one that fell behind (a slow answer)
  // starts the next at once, without a burst to catch up.
  async function worker (index: number): Promise<void> {
    const interval = 1000 * options.workers / options.rate
    const token = options.tokens[index % options.tokens.length] as string
    let next = performance.now() + Math.random() * interval
    while (!control.stopped) {
      const wait = next - performance.now()
      if (wait > 0) await sleep(wait)
      if (control.stopped) break
      next = Math.max(next + interval, performance.now())
      await (Math.random() < 0.2 ? post(token) : read())
    }
  }

  const workers = Array.from({ length: options.workers }, async (_, i) => await worker(i))
  return {
    async stop () {
      control.stopped = true
      await Promise.all(workers)
      await agent.close()
      return result
    }
  }
}
