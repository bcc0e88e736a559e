import { EventSource, type FetchLike } from 'eventsource'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { Agent, fetch } from 'undici'
import { buildApp, type App } from '../../src/app.js'
import { COLUMNS, pgliteWriter, postgresWriter, type Session, type Writer } from '../helpers/sql-writer.js'
import { testConfig } from '../helpers/build.js'
import { ADMIN, buildWithUrl, lit, rawRows, Rng, run as runSql, seedFromEnv } from '../helpers/exactness.js'
import { changesUrl, clientsOf, get, LiveCopy, type Answer } from '../helpers/live.js'
import { scaled } from '../helpers/scale.js'
import { differences, messagesAsServed, quiesce } from '../helpers/sync-client.js'

// Live delivery (CONTRACT 13) as a property: live clients hold exactly the table, whoever writes and
// however they come and go. Writers through the API (POST, DELETE) and SQL sessions (INSERT, COPY,
// UPDATE, DELETE, transactions of several statements) run while clients follow the feed: EventSource
// clients (the `eventsource` package, a real SSE client) and long-poll clients. Clients disconnect at
// random and resume from their last event id: EventSource clients by closing and opening a new
// EventSource that sends Last-Event-ID, or by a dropped connection that the EventSource itself
// reconnects; long-poll clients by abandoning a held request. On PostgreSQL there are two app
// instances on one database, a client resumes on either, the SQL writers are sessions of their own,
// and a transaction that began first stays open across many commits and commits last. Every write
// raises a marker at the end of the content of the rows it touches (`#<n>`, from a sequence, under
// the row's lock), so a client that applied a row's changes out of order is caught. Once the writers
// stop, a last row is written; when every client has applied an answer showing it and then one that
// says hasMore: false, every copy must be the table, row for row, as GET /v2/messages/{id} renders it.
//
// Replay with EXACTNESS_SEED (the interleaving is real concurrency and differs from run to run).

const seed = seedFromEnv()
t.comment(`live property seed ${seed} (replay with EXACTNESS_SEED=${seed})`)
const onPostgres = (process.env.TEST_DATABASE_URL ?? '') !== ''

const SSE_CLIENTS = 3
const POLL_CLIENTS = 2
const SQL_WRITERS = 2
const API_WRITERS = 2
/** Writes each writer makes. */
const WRITES_EACH = scaled(onPostgres ? 30 : 15)
const PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const
/** How long at most the transaction that began first stays open. */
const HOLD_OPEN_MS = 3_000
/** Rows only the long-transaction scenario touches; regular writers stay below. */
const RESERVED = 50_000_000
const SENTINEL = 90_000_000
const REGULAR = `id < ${RESERVED}`
const BUMP = "content = regexp_replace(content, '#[0-9]+$', '#' || nextval('live_marker'))"
const WAIT_MS = 60_000
/** Past this, the scenario is stuck, not slow (it takes 10-60 s): say where, well before the file's limit. */
const STUCK_MS = 240_000

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

interface Instance { app: App, url: string }

interface Client {
  name: string
  copy: LiveCopy
  /** Resumptions: after a disconnect, from the last event id (or `next`). */
  resumes: number
  /** Resumptions on another instance than the one before. */
  moves: number
  sawSentinel: boolean
  /** An answer at or after the one showing the last row said hasMore: false. */
  done: boolean
  problems: string[]
}

interface World {
  t: Test
  rng: Rng
  instances: Instance[]
  /** The regular writers' authors, whom they also rename. */
  authors: number[]
  /** The author of the long-transaction scenario's rows, whom no one renames (see longTransaction). */
  reservedAuthor: number
  commits: number
  aborted: number
  writing: boolean
  /** Regular writers still writing. */
  writersLeft: number
  stopped: boolean
  clients: Client[]
  /** Long-poll answers received, for the scenario's progress. */
  pollAnswers: number
  /** The EventSource clients' connections, destroyed before the apps close. */
  agent: Agent
  /** What the scenario is doing now, for the report of a stuck run. */
  phase: string
  /** Writers and transactions that have not finished yet, by name. */
  running: Set<string>
}

/**
 * Whether a writer goes on after `op` writes: WRITES_EACH, and longer (up to four times as many)
 * until every client has disconnected and resumed while writes were coming.
 */
function writing (w: World, op: number): boolean {
  return op < WRITES_EACH || (op < 4 * WRITES_EACH && w.clients.some((c) => c.resumes === 0))
}

function newClient (name: string): Client {
  return { name, copy: new LiveCopy(name), resumes: 0, moves: 0, sawSentinel: false, done: false, problems: [] }
}

function applyTo (client: Client, answer: Answer, where: string): void {
  client.copy.apply(answer, where)
  if (answer.data.some((e) => e.id === SENTINEL && e.op === 'upsert')) client.sawSentinel = true
  if (client.sawSentinel && !answer.hasMore) client.done = true
}

function content (rng: Rng, who: string): string {
  return `${rng.sample(['quick', 'brown', 'fox', 'ünïcødé', '"quoted"', "it's", '🙂'], rng.int(1, 4)).join(' ')} ${who} #0`
}

function rowValues (rng: Rng, ids: number[], who: string, authors: number[]): string {
  return ids.map((id) => `(${id}, ${lit(content(rng, who))}, ${lit(rng.chance(0.3) ? null : 'subject')}, ${lit(rng.pick(PRIORITIES))}, ${rng.pick(authors)}, now())`).join(', ')
}

/** An EventSource client: resumes by a new EventSource (Last-Event-ID) or by the EventSource's own reconnection. */
async function sseClient (w: World, client: Client, rng: Rng, limit: number): Promise<void> {
  let instance = rng.int(0, w.instances.length - 1)
  let drop: (() => void) | undefined
  let naturalDrops = 0
  let eventsSinceConnect = 0
  let disconnectAfter = rng.int(1, 4)
  const fetcher: FetchLike = async (input, init) => {
    // Whatever URL the EventSource asks for, the connection goes where this client is now.
    const target = new URL(String(input))
    target.host = new URL(w.instances[instance]!.url).host
    const headers: Record<string, string> = { ...init.headers }
    if (headers['Last-Event-ID'] === undefined && client.copy.next !== undefined) headers['Last-Event-ID'] = client.copy.next
    const res = await fetch(target, { ...init, headers, dispatcher: w.agent })
    if (res.body === null) return res
    const reader = res.body.getReader()
    const body = new ReadableStream<Uint8Array>({
      async pull (controller) {
        const { done, value } = await reader.read()
        if (done) controller.close()
        else controller.enqueue(value)
      },
      async cancel (reason) { await reader.cancel(reason) }
    })
    // The connection goes away under the EventSource: it reads the end and reconnects by itself.
    drop = () => { reader.cancel().catch(() => {}) }
    return { body, url: res.url, status: res.status, redirected: res.redirected, headers: res.headers }
  }

  let source: EventSource | undefined
  const open = (): void => {
    const es = new EventSource(changesUrl(w.instances[instance]!.url, { limit: String(limit) }), { fetch: fetcher })
    source = es
    eventsSinceConnect = 0
    es.addEventListener('changes', (event) => {
      if (es !== source) return
      let answer: Answer
      try {
        answer = JSON.parse(event.data) as Answer
      } catch {
        client.problems.push(`not JSON: ${String(event.data).slice(0, 200)}`)
        return
      }
      if (event.lastEventId !== answer.next) client.problems.push('an event id that is not the answer\'s next')
      if (answer.data.length === 0) client.problems.push('an event without changes')
      applyTo(client, answer, `${client.name} event ${client.copy.answers + 1}`)
      eventsSinceConnect++
    })
    es.addEventListener('error', (event) => {
      if (es !== source) return
      const code = (event as { code?: number }).code
      if (code !== undefined) client.problems.push(`EventSource error ${code}: ${String((event as { message?: string }).message)}`)
    })
  }
  open()
  try {
    while (!w.stopped && client.problems.length === 0) {
      await sleep(rng.int(2, 15))
      if (!w.writing || eventsSinceConnect < disconnectAfter) continue
      disconnectAfter = rng.int(2, 8)
      const previous = instance
      instance = rng.int(0, w.instances.length - 1)
      client.resumes++
      if (instance !== previous) client.moves++
      if (naturalDrops === 0 && drop !== undefined) {
        // Once per client: the EventSource reconnects by itself (after its default 3 s), with Last-Event-ID.
        naturalDrops++
        eventsSinceConnect = 0
        drop()
      } else {
        source?.close()
        open()
      }
    }
  } finally {
    source?.close()
  }
}

/** A long-poll client: held requests on either instance, some abandoned while held, resumed from `next`. */
async function pollClient (w: World, client: Client, rng: Rng, limit: number): Promise<void> {
  let instance = rng.int(0, w.instances.length - 1)
  while (!w.stopped && client.problems.length === 0) {
    const abandon = w.writing && client.copy.next !== undefined && (client.resumes === 0 || rng.chance(0.15))
    const controller = new AbortController()
    const url = changesUrl(w.instances[instance]!.url, { since: client.copy.next, limit: String(limit), wait: String(rng.int(1, 2)) })
    const request = get(url, { signal: controller.signal })
    if (abandon) setTimeout(() => controller.abort(), rng.int(0, 50))
    let res
    try {
      res = await request
    } catch {
      // Abandoned: the client resumes from its last answer's next, perhaps on the other instance.
      const previous = instance
      instance = rng.int(0, w.instances.length - 1)
      client.resumes++
      if (instance !== previous) client.moves++
      continue
    }
    if (res.status !== 200) {
      client.problems.push(`GET ${url}: ${res.status} ${res.text.slice(0, 200)}`)
      return
    }
    w.pollAnswers++
    applyTo(client, res.body as Answer, `${client.name} answer ${client.copy.answers + 1}`)
    if (rng.chance(0.2)) instance = rng.int(0, w.instances.length - 1)
  }
}

async function apiWriter (w: World, k: number, rng: Rng): Promise<void> {
  for (let op = 0; writing(w, op); op++) {
    const { app } = rng.pick(w.instances)
    if (rng.chance(0.7)) {
      const sub = rng.pick(['bob', 'carol', 'dave'])
      const res = await app.inject({ method: 'POST', url: '/v2/messages', headers: { 'x-test-user': JSON.stringify({ sub, role: 'User' }) }, payload: { content: content(rng, `api-${k}`), priority: rng.pick(PRIORITIES) } })
      if (res.statusCode !== 201) throw new Error(`api-${k}: POST ${res.statusCode} ${res.body}`)
    } else {
      const [row] = await rawRows<{ id: number }>(app, `SELECT id::float8 AS id FROM messages WHERE ${REGULAR} ORDER BY random() LIMIT 1`)
      if (row !== undefined) {
        const res = await app.inject({ method: 'DELETE', url: `/v2/messages/${row.id}`, headers: { 'x-test-user': ADMIN } })
        if (res.statusCode !== 204 && res.statusCode !== 404) throw new Error(`api-${k}: DELETE ${res.statusCode} ${res.body}`)
      }
    }
    w.commits++
    await sleep(rng.int(0, 20))
  }
}

async function sqlWriter (w: World, k: number, rng: Rng, writer: Writer): Promise<void> {
  let nextId = k * 1_000_000
  const fresh = (n: number): number[] => Array.from({ length: n }, () => { nextId += rng.int(1, 3); return nextId })
  const pickRegular = (n: number): string => `SELECT id FROM messages WHERE ${REGULAR} ORDER BY random() LIMIT ${n}`
  const statements: Array<(s: Session) => Promise<void>> = [
    (s) => s.exec(`INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rowValues(rng, fresh(rng.int(1, 5)), `sql-${k} insert`, w.authors)}`),
    (s) => s.copy(fresh(rng.int(2, 8)).map((id) => [id, content(rng, `sql-${k} copy`), '\\N', rng.pick(PRIORITIES), rng.pick(w.authors), new Date().toISOString()].join('\t')).join('\n') + '\n'),
    (s) => s.exec(`UPDATE messages SET ${BUMP} WHERE id IN (${pickRegular(rng.int(1, 5))})`),
    (s) => s.exec(`UPDATE messages SET ${BUMP}, priority = ${lit(rng.pick(PRIORITIES))}, subject = ${lit(rng.chance(0.5) ? null : `s${rng.int(1, 9)}`)} WHERE id IN (${pickRegular(rng.int(1, 8))})`),
    (s) => s.exec(`UPDATE users SET name = ${lit(`Author ${rng.int(1, 1000)}`)} WHERE id = ${rng.pick(w.authors)}`),
    (s) => s.exec(`DELETE FROM messages WHERE id IN (${pickRegular(rng.int(1, 3))})`)
  ]
  for (let op = 0; writing(w, op); op++) {
    try {
      if (rng.chance(0.25)) {
        const body = Array.from({ length: rng.int(2, 3) }, () => rng.pick(statements))
        await writer.tx(async (s) => {
          for (const statement of body) {
            await statement(s)
            if (onPostgres) await sleep(rng.int(0, 5))
          }
        })
      } else {
        await rng.pick(statements)(writer)
      }
      w.commits++
    } catch (err) {
      const code = (err as { code?: string }).code
      if (code === '40P01' || code === '40001') w.aborted++
      else throw err
    }
    await sleep(rng.int(0, 20))
  }
}

/**
 * PostgreSQL: T1 begins and writes, T2 begins, writes and commits, T1 stays open while the others
 * commit and the long-poll clients are answered again and again, then writes again and commits last.
 * T1 waits here for T2, which PostgreSQL cannot see; so T2 must never wait for a lock held by a
 * writer that itself waits for T1. Their rows have an author of their own: a write locks a message's
 * author FOR SHARE (drizzle/0010), and a writer's transaction that renamed author A and then waits
 * to rename B, which T1 locked, would hold up T2 writing a row of A until T1 commits: forever.
 */
async function longTransaction (w: World, url: string, rng: Rng): Promise<void> {
  const reserved = [w.reservedAuthor]
  const first = postgres(url, { max: 1, onnotice: () => {} })
  const second = postgres(url, { max: 1, onnotice: () => {} })
  try {
    let wrote!: () => void
    const t1Wrote = new Promise<void>((resolve) => { wrote = resolve })
    let release!: () => void
    const t1MayFinish = new Promise<void>((resolve) => { release = resolve })
    const t1 = first.begin(async (tx) => {
      await tx.unsafe(`INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rowValues(rng, [RESERVED + 100, RESERVED + 101], 'T1 early', reserved)}`)
      await tx.unsafe(`UPDATE messages SET ${BUMP} WHERE id IN (${RESERVED}, ${RESERVED + 1})`)
      wrote()
      await t1MayFinish
      await tx.unsafe(`INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rowValues(rng, [RESERVED + 102], 'T1 late', reserved)}`)
      await tx.unsafe(`UPDATE messages SET ${BUMP} WHERE id = ${RESERVED}`)
      await tx.unsafe(`DELETE FROM messages WHERE id = ${RESERVED + 2}`)
    })
    await Promise.race([t1Wrote, t1])
    await second.begin(async (tx) => {
      await tx.unsafe(`INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rowValues(rng, [RESERVED + 200], 'T2', reserved)}`)
      await tx.unsafe(`UPDATE messages SET ${BUMP} WHERE id IN (${RESERVED + 3}, ${RESERVED + 4})`)
    })
    const answers = w.pollAnswers
    const commits = w.commits
    // Held open for a bounded time, never until clients make progress: the xmin that holds the feed
    // back is the whole cluster's, so a transaction left open by another test file running at the same
    // time on the same server stops every answer here too, and waiting for answers would wait for it.
    const until = performance.now() + HOLD_OPEN_MS
    while ((w.pollAnswers < answers + 2 * POLL_CLIENTS || (w.writersLeft > 0 && w.commits < commits + 10)) && performance.now() < until) {
      await sleep(10)
    }
    w.t.ok(w.commits > commits || w.writersLeft === 0, `the transaction that began first stayed open across ${w.pollAnswers - answers} long-poll answers and ${w.commits - commits} commits`)
    release()
    await t1
  } finally {
    await Promise.all([first.end({ timeout: 5 }), second.end({ timeout: 5 })])
  }
}

/**
 * A run past STUCK_MS: what it waits for, from the clients', the instances' and the database's side,
 * printed while it still waits, so a hang is diagnosed from the log of the run that had it.
 */
async function reportStuck (w: World, databaseUrl: string): Promise<void> {
  const clients = w.clients.map((c) => ({ name: c.name, answers: c.copy.answers, next: c.copy.next, resumes: c.resumes, sawSentinel: c.sawSentinel, done: c.done, problems: c.problems.slice(0, 3) }))
  const instances = w.instances.map(({ app }) => app.changes.stats())
  let sessions: unknown = 'PGlite: one session'
  if (onPostgres) sessions = await sessionsOf(databaseUrl)
  console.error(`live property stuck after ${STUCK_MS} ms: ${JSON.stringify({ phase: w.phase, running: [...w.running], writersLeft: w.writersLeft, commits: w.commits, pollAnswers: w.pollAnswers, clients, instances, sessions }, null, 1)}`)
}

/** The database's sessions: what each waits for and on whom. */
async function sessionsOf (databaseUrl: string): Promise<unknown> {
  const admin = postgres(databaseUrl, { max: 1, onnotice: () => {}, connect_timeout: 10, connection: { statement_timeout: 10_000 } })
  try {
    return await admin`
      select pid, application_name, state, wait_event_type, wait_event, now() - xact_start as in_transaction,
        pg_blocking_pids(pid) as blocked_by, left(query, 160) as query
      from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`
  } catch (err) {
    return `unread: ${String(err)}`
  } finally {
    await admin.end({ timeout: 5 })
  }
}

t.test(`live clients hold exactly the table, whoever writes and however they come and go (seed ${seed})`, async (t) => {
  const started = performance.now()
  const rng = new Rng(seed)
  const { app, url: databaseUrl } = await buildWithUrl(t)
  const instances: Instance[] = [{ app, url: await app.listen({ host: '127.0.0.1', port: 0 }) }]
  if (onPostgres) {
    // Another instance on the same database: clients resume on either.
    const other = await buildApp(testConfig({ databaseUrl }), { logger: false, testAuth: true })
    t.teardown(() => other.close())
    instances.push({ app: other, url: await other.listen({ host: '127.0.0.1', port: 0 }) })
  }
  for (const instance of instances) clientsOf(t, instance.url)
  const agent = new Agent()
  t.teardown(() => agent.destroy())

  await app.inject({ method: 'GET', url: '/v2/users/me', headers: { 'x-test-user': ADMIN } })
  await runSql(app, 'CREATE SEQUENCE live_marker')
  await runSql(app, "INSERT INTO users (subject_id, name, email, role) SELECT 'sql-author-' || i, 'Author ' || i, NULL, 'User' FROM generate_series(0, 4) i")
  const [reservedAuthor = 0, ...authors] = (await rawRows<{ id: number }>(app, "SELECT id::float8 AS id FROM users WHERE subject_id LIKE 'sql-author-%' ORDER BY subject_id")).map((r) => Number(r.id))
  const w: World = { t, rng, instances, authors, reservedAuthor, commits: 0, aborted: 0, writing: false, writersLeft: SQL_WRITERS + API_WRITERS, stopped: false, clients: [], pollAnswers: 0, agent, phase: 'initial copies', running: new Set() }
  // Never cleared, only unreferenced: a run that finished exits before it fires, and one stuck in
  // its teardown (closing the instances) is reported too.
  setTimeout(() => { reportStuck(w, databaseUrl).catch((err: unknown) => { console.error(`stuck report failed: ${String(err)}`) }) }, STUCK_MS).unref()
  await runSql(app, `INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rowValues(rng, Array.from({ length: 40 }, (_, i) => 100_000 + i * 7), 'preload', authors)}`)
  await runSql(app, `INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rowValues(rng, Array.from({ length: 5 }, (_, i) => RESERVED + i), 'reserved', [reservedAuthor])}`)

  const writers: Writer[] = Array.from({ length: SQL_WRITERS }, () => onPostgres ? postgresWriter(databaseUrl) : pgliteWriter(app))
  t.teardown(async () => { await Promise.all(writers.map((writer) => writer.close())) })
  // Teardowns run last first: this one as the test's own work ends.
  t.teardown(() => { w.phase = 'closing the writers, the clients\' connections and the instances' })

  // Clients first; the writers start once every client has its initial copy.
  const following: Array<Promise<void>> = []
  for (let i = 0; i < SSE_CLIENTS; i++) {
    const client = newClient(`sse-${i}`)
    w.clients.push(client)
    following.push(sseClient(w, client, new Rng(rng.int(0, 2 ** 30)), rng.pick([1, 5, 100])))
  }
  for (let i = 0; i < POLL_CLIENTS; i++) {
    const client = newClient(`poll-${i}`)
    w.clients.push(client)
    following.push(pollClient(w, client, new Rng(rng.int(0, 2 ** 30)), rng.pick([3, 100])))
  }
  const failed = (): string | undefined => w.clients.flatMap((c) => c.problems.map((p) => `${c.name}: ${p}`))[0]
  const until = async (ready: () => boolean, what: string): Promise<void> => {
    const deadline = performance.now() + WAIT_MS
    while (!ready()) {
      const problem = failed()
      if (problem !== undefined) throw new Error(`${what}: ${problem}`)
      if (performance.now() > deadline) throw new Error(`no ${what} within ${WAIT_MS} ms`)
      await sleep(10)
    }
  }
  try {
    await until(() => w.clients.every((c) => c.copy.answers > 0), 'initial copy in every client')

    w.writing = true
    w.phase = 'writing'
    const named = async (name: string, writing: Promise<void>, regularWriter = true): Promise<void> => {
      w.running.add(name)
      try {
        await writing
      } finally {
        w.running.delete(name)
        if (regularWriter) w.writersLeft--
      }
    }
    const work: Array<Promise<void>> = [
      ...writers.map((writer, k) => named(`sql-${k + 1}`, sqlWriter(w, k + 1, new Rng(rng.int(0, 2 ** 30)), writer))),
      ...Array.from({ length: API_WRITERS }, (_, k) => named(`api-${k + 1}`, apiWriter(w, k + 1, new Rng(rng.int(0, 2 ** 30)))))
    ]
    if (onPostgres) work.push(named('long-transaction', longTransaction(w, databaseUrl, new Rng(rng.int(0, 2 ** 30))), false))
    const settled = await Promise.allSettled(work)
    w.writing = false
    const rejected = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected')
    if (rejected !== undefined) throw rejected.reason

    // Every write transaction has ended; the last row follows them all.
    w.phase = 'quiescing'
    await quiesce(app)
    await runSql(app, `INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rowValues(rng, [SENTINEL], 'last', authors)}`)
    w.phase = 'waiting for the last row in every client'
    await until(() => w.clients.every((c) => c.done), 'answer with the last row and then hasMore: false in every client')
  } finally {
    w.phase = 'stopping the clients'
    w.stopped = true
    await Promise.allSettled(following)
  }
  w.phase = 'comparing'

  const table = await messagesAsServed(app)
  for (const client of w.clients) {
    t.same(client.problems, [], `${client.name}: every answer well formed, no error`)
    t.strictSame(differences(client.copy.sorted(), table), { missing: [], extra: [], differ: [] },
      `${client.name}: the copy is the table (${table.length} rows; ${client.copy.answers} answers, ${client.resumes} resumptions, ${client.moves} on the other instance)`)
    t.same(client.copy.outOfOrder.slice(0, 10), [], `${client.name}: no change applied out of order`)
    t.ok(client.resumes >= 1, `${client.name}: disconnected and resumed at least once`)
  }
  if (onPostgres) t.ok(w.clients.reduce((n, c) => n + c.moves, 0) >= 1, 'clients resumed on the other instance')
  for (const expected of rng.sample(table, 3)) {
    const res = await app.inject({ url: `/v2/messages/${expected.id}` })
    t.strictSame(res.json(), expected, `GET /v2/messages/${expected.id} renders the row as the comparison does`)
  }
  t.comment(`${w.commits} writes committed, ${w.aborted} aborted by deadlock; ${table.length} messages; ${Math.round(performance.now() - started)} ms`)
})
