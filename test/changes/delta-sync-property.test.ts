import { performance } from 'node:perf_hooks'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { buildApp, type App } from '../../src/app.js'
import { decodeSyncToken } from '../../src/changes/token.js'
import { COLUMNS, pgliteWriter, postgresWriter, type Session, type Writer } from '../helpers/sql-writer.js'
import { testConfig } from '../helpers/build.js'
import { ADMIN, buildWithUrl, lit, rawRows, Rng, run as runSql, seedFromEnv } from '../helpers/exactness.js'
import { startPgCluster } from '../../scripts/postgres/throwaway-cluster.js'
import { scaled } from '../helpers/scale.js'
import { differences, messagesAsServed, quiesce, SyncClient } from '../helpers/sync-client.js'

// Delta sync (CONTRACT 12, issue 15 item 6), as a property. A client follows GET /v2/messages/changes
// from its first call (no `since`), applying every answer, while writers run: API writers (POST, with
// and without Idempotency-Key, and DELETE by the author or by an Admin) and SQL sessions (INSERT, COPY,
// UPDATE of content, subject, priority and author, renames of authors, DELETE, cascades from a deleted
// user, transactions of several statements, some rolled back). On PostgreSQL the SQL sessions are
// clients of their own (the `postgres` driver on the test database, as psql would be), and two more
// scenarios run: two transactions that commit in the opposite order from the one in which they began
// and wrote, and a transaction that writes early and stays open across many polls. Once every writer
// has stopped and a call that began after every write transaction had ended answers `hasMore: false`,
// the client's copy must be the table, row for row, as GET /v2/messages/{id} renders it.
//
// Replay a failure with EXACTNESS_SEED (the seed fixes what each writer does; the interleaving is
// real concurrency and differs from run to run).

const seed = seedFromEnv()
t.comment(`delta sync seed ${seed} (replay with EXACTNESS_SEED=${seed})`)
const server = process.env.TEST_DATABASE_URL
const onPostgres = server !== undefined && server !== ''

// Small limits page through everything; the initial copy spans at least four pages at each.
const RUNS = [{ limit: 1, seed }, { limit: 7, seed: seed + 1 }, { limit: 100, seed: seed + 2 }]

const PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const
const SUBJECTS = ['alpha', 'beta', 'gamma', 'Delta'] as const
const API_USERS = ['bob', 'carol', 'dave', 'erin'] as const
const SQL_WRITERS = 3
const API_WRITERS = 3
/**
 * Each regular writer makes at least this many writes, and goes on until the PostgreSQL scenarios have
 * ended and the writers together have committed AFTER_COPY writes since the initial copy ended (else,
 * at limit 1, the copy may last as long as the writers and see most writes as rows rather than changes).
 * Both grow with TEST_PROPERTY_SCALE (CI's PostgreSQL pass sets 3).
 */
const MIN_OPS = { sql: scaled(7), api: scaled(8) }
const AFTER_COPY = scaled(20)
/**
 * Bounds on work, not on time, so that a slow machine only takes longer: the regular writers together
 * begin at most MAX_WRITES writes, and the initial copy must end within MAX_COPY_CALLS calls (else it
 * fails saying so); the assertions then say what did not happen.
 */
const MAX_WRITES = 3_000
const MAX_COPY_CALLS = 3_000
/** Writes the regular writers may begin before the client's first call. */
const FIRST_WRITES = 3
/** Rows only the scenario transactions write (10 each), so they never wait for a lock another writer holds. */
const RESERVED = 50_000_000
/** Fresh ids of the scenario transactions (100 each). */
const SCENARIO_IDS = 60_000_000
/** Regular writers update and delete only below RESERVED; SQL writer k inserts ids from k × 1,000,000. */
const REGULAR = `id < ${RESERVED}`
const WAIT_MS = 30_000
/** Calls the client may make to catch up while the regular writers wait for it. */
const MAX_CATCH_UP_CALLS = 100_000

class Rollback extends Error {}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

function content (rng: Rng, who: string): string {
  const words = ['quick', 'brown', 'fox', 'jumps', 'lorem', 'ünïcødé', '"quoted"', "it's", '🙂', '50%_off', who]
  return rng.sample(words, rng.int(2, 6)).join(' ')
}

function createdAt (rng: Rng): string {
  return new Date(rng.int(Date.parse('2015-01-01T00:00:00Z'), Date.parse('2026-01-01T00:00:00Z'))).toISOString()
}

/** Shared state of one run: the app, the client, and what the writers did. */
interface Run {
  t: Test
  app: App
  url: string
  client: SyncClient
  /** Who wrote each id first, for the failure report. */
  origin: Map<number, string>
  /** The `sql-author-*` users: never deleted, so any writer may give them messages. */
  authors: number[]
  /**
   * The author of the scenarios' rows (their id, as SQL), whom no writer renames or deletes. A
   * scenario waits in the test for another transaction, which PostgreSQL cannot see: a write locks its
   * rows' author FOR SHARE (drizzle/0010), so with a regular author, T2 could wait for a writer that
   * renamed that author and itself waits for T1, which waits for T2: for ever.
   */
  scenarioAuthor: string
  commits: number
  aborted: number
  rolledBack: number
  /** Writes the regular writers have begun. */
  begun: number
  /** Regular writers still running. */
  writersLeft: number
  /** Scenarios waiting for the client to catch up: no regular writer begins a write meanwhile. */
  holds: number
  /** The client waits for a write between two pages of its initial copy. */
  awaitingWrite: boolean
  scenariosDone: boolean
  failure: unknown
  /** Answers of the initial copy (up to the one that switched to changes), and writes committed meanwhile. */
  copyPages: number
  commitsDuringCopy: number
  /** `commits` when the initial copy ended. */
  commitsAtCopyEnd: number | undefined
  /**
   * At most this many rows per INSERT or COPY, up to pauseMs between two writes of one writer, and
   * during the initial copy writesPerPage writes for each page the client has read.
   */
  pace: { rows: number, pauseMs: number, writesPerPage: number }
}

/** Whether a regular writer goes on after `op` writes. */
function writing (run: Run, op: number, min: number): boolean {
  if (run.begun >= MAX_WRITES || run.failure !== undefined) return false
  const afterCopy = run.commitsAtCopyEnd !== undefined && run.commits - run.commitsAtCopyEnd >= AFTER_COPY
  return op < min || !run.scenariosDone || !afterCopy
}

/**
 * Whether a regular writer may begin a write now. During the initial copy the writers keep pace with
 * the client, whatever the speed of either: whenever it waits for a write between its first pages,
 * then writesPerPage a page, few enough that the rows they add beyond the copy's position are read
 * long before the copy ends; else, at limit 1, fast writers could keep it from ever ending. Committed
 * writes are counted, not begun ones: on PostgreSQL a rename waits for a scenario transaction holding
 * that author FOR SHARE, and must not keep the other writers from their turns meanwhile. Once the copy
 * has ended, they write freely, except while a scenario waits for the client to catch up.
 */
function mayBegin (run: Run): boolean {
  if (run.commitsAtCopyEnd !== undefined) return run.holds === 0
  return run.awaitingWrite || run.commits < FIRST_WRITES + Math.floor(run.copyPages * run.pace.writesPerPage)
}

/** Waits until a regular writer may begin a write; false when it is to stop instead. */
async function turn (run: Run, op: number, min: number): Promise<boolean> {
  for (;;) {
    if (!writing(run, op, min)) return false
    if (mayBegin(run)) {
      run.begun++
      return true
    }
    await sleep(1)
  }
}

const writersStopped = (run: Run) => () => run.writersLeft === 0 ? `the writers stopped after ${run.begun} writes (at most ${MAX_WRITES})` : undefined

/**
 * Waits for `ready`, which other parts of the run bring about; fails as soon as one of them failed,
 * or when `stopped` says why `ready` can no longer come (no clock decides).
 */
async function until (run: Run, ready: () => boolean, what: string, stopped: () => string | undefined): Promise<void> {
  while (!ready()) {
    if (run.failure !== undefined) throw new Error(`gave up waiting for ${what}: the run failed`)
    const why = stopped()
    if (why !== undefined) throw new Error(`no ${what}: ${why}`)
    await sleep(1)
  }
}

function rows (run: Run, rng: Rng, ids: number[], who: string, author?: string): string[] {
  return ids.map((id) => {
    run.origin.set(id, who)
    const subject = rng.chance(0.25) ? null : rng.pick(SUBJECTS)
    const authorSql = author ?? String(rng.pick(run.authors))
    return `(${id}, ${lit(content(rng, who))}, ${lit(subject)}, ${lit(rng.pick(PRIORITIES))}, ${authorSql}, ${lit(createdAt(rng))})`
  })
}

function copyData (run: Run, rng: Rng, ids: number[], who: string): string {
  return ids.map((id) => {
    run.origin.set(id, who)
    const subject = rng.chance(0.25) ? '\\N' : rng.pick(SUBJECTS)
    return [id, content(rng, who), subject, rng.pick(PRIORITIES), rng.pick(run.authors), createdAt(rng)].join('\t')
  }).join('\n') + '\n'
}

const randomRegular = (n: number) => `SELECT id FROM messages WHERE ${REGULAR} ORDER BY random() LIMIT ${n}`

/** One SQL client writing: k picks its id range; every statement is one of the kinds the feed must log. */
async function sqlWriter (run: Run, k: number, rng: Rng, writer: Writer): Promise<void> {
  const who = `sql-${k}`
  let nextId = k * 1_000_000
  const fresh = (n: number) => Array.from({ length: n }, () => { nextId += rng.int(1, 3); return nextId })
  const tempUsers: string[] = []
  let unique = 0

  const statements: Array<[number, (s: Session) => Promise<void>]> = [
    [3, (s) => s.exec(`INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rows(run, rng, fresh(rng.int(1, Math.min(8, run.pace.rows))), `${who} INSERT`).join(', ')}`)],
    [3, (s) => s.copy(copyData(run, rng, fresh(rng.int(2, run.pace.rows)), `${who} COPY`))],
    [2, (s) => s.exec(`UPDATE messages SET content = ${lit(content(rng, `${who} edit`))} WHERE id IN (${randomRegular(rng.int(1, 5))})`)],
    [2, (s) => s.exec(`UPDATE messages SET subject = ${lit(rng.chance(0.3) ? null : rng.pick(SUBJECTS))} WHERE id IN (${randomRegular(rng.int(1, 5))})`)],
    [2, (s) => s.exec(`UPDATE messages SET priority = ${lit(rng.pick(PRIORITIES))} WHERE id IN (${randomRegular(rng.int(1, 8))})`)],
    [1, (s) => s.exec(`UPDATE messages SET author_id = ${rng.pick(run.authors)} WHERE id IN (${randomRegular(rng.int(1, 3))})`)],
    [1, (s) => s.exec(`UPDATE users SET name = ${lit(rng.chance(0.2) ? null : `Renamed ${who}.${unique++}`)} WHERE id = ${rng.pick(run.authors)}`)],
    [2, (s) => s.exec(`DELETE FROM messages WHERE id IN (${randomRegular(rng.int(1, 3))})`)],
    [1, (s) => {
      const from = k * 1_000_000 + rng.int(0, Math.max(1, nextId - k * 1_000_000))
      return s.exec(`DELETE FROM messages WHERE id BETWEEN ${from} AND ${from + rng.int(5, 60)}`)
    }],
    [1, async (s) => {
      // A user of its own with a few messages, deleted later: the messages go by cascade.
      const subject = `temp-${k}-${unique++}`
      await s.exec(`INSERT INTO users (subject_id, name, email, role) VALUES (${lit(subject)}, ${lit(`Temp ${subject}`)}, NULL, 'User')`)
      const author = `(SELECT id FROM users WHERE subject_id = ${lit(subject)})`
      await s.exec(`INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rows(run, rng, fresh(rng.int(1, 4)), `${who} temp user`, author).join(', ')}`)
      tempUsers.push(subject)
    }],
    [1, async (s) => {
      const subject = tempUsers.shift()
      if (subject !== undefined) await s.exec(`DELETE FROM users WHERE subject_id = ${lit(subject)}`)
    }]
  ]
  const total = statements.reduce((sum, [weight]) => sum + weight, 0)
  const pick = () => {
    let r = rng.int(1, total)
    for (const [weight, statement] of statements) {
      if ((r -= weight) <= 0) return statement
    }
    throw new Error('unreachable')
  }

  for (let op = 0; await turn(run, op, MIN_OPS.sql); op++) {
    try {
      if (rng.chance(0.25)) {
        // Several statements in one transaction; on PostgreSQL it stays open a moment between them.
        const body = Array.from({ length: rng.int(2, 4) }, pick)
        const rollback = rng.chance(0.15)
        await writer.tx(async (s) => {
          for (const statement of body) {
            await statement(s)
            if (onPostgres) await sleep(rng.int(0, 4))
          }
          if (rollback) throw new Rollback()
        })
      } else {
        await pick()(writer)
      }
      run.commits++
    } catch (err) {
      const code = (err as { code?: string }).code
      if (err instanceof Rollback) run.rolledBack++
      // Concurrent UPDATEs and DELETEs of random rows may deadlock: the loser is rolled back, a write like any other.
      else if (code === '40P01' || code === '40001') run.aborted++
      else throw err
    }
    await sleep(rng.int(0, run.pace.pauseMs))
  }
}

/** One API writer: creations (some with an Idempotency-Key) and deletions by the author or by an Admin. */
async function apiWriter (run: Run, k: number, rng: Rng): Promise<void> {
  const { app } = run
  for (let op = 0; await turn(run, op, MIN_OPS.api); op++) {
    const sub = rng.pick(API_USERS)
    const user = JSON.stringify({ sub, role: 'User' })
    if (rng.chance(0.7)) {
      const payload: Record<string, string> = { content: content(rng, `api-${k}`) }
      if (rng.chance(0.7)) payload.subject = rng.pick(SUBJECTS)
      if (rng.chance(0.7)) payload.priority = rng.pick(PRIORITIES)
      const headers: Record<string, string> = { 'x-test-user': user }
      if (rng.chance(0.2)) headers['idempotency-key'] = `api-${k}-${op}`
      const res = await app.inject({ method: 'POST', url: '/v2/messages', headers, payload })
      if (res.statusCode !== 201) throw new Error(`api-${k}: POST /v2/messages: ${res.statusCode} ${res.body}`)
      run.origin.set((res.json() as { id: number }).id, `api-${k} POST`)
    } else {
      const own = rng.chance(0.5)
      const [row] = await rawRows<{ id: number }>(app, own
        ? `SELECT m.id::float8 AS id FROM messages m JOIN users u ON u.id = m.author_id WHERE u.subject_id = ${lit(sub)} AND m.${REGULAR} ORDER BY random() LIMIT 1`
        : `SELECT id::float8 AS id FROM messages WHERE ${REGULAR} ORDER BY random() LIMIT 1`)
      if (row !== undefined) {
        const res = await app.inject({ method: 'DELETE', url: `/v2/messages/${row.id}`, headers: { 'x-test-user': own ? user : ADMIN } })
        // Since it was picked, another writer may have deleted it (404) or given it another author (403).
        if (res.statusCode !== 204 && res.statusCode !== 404 && !(own && res.statusCode === 403)) throw new Error(`api-${k}: DELETE /v2/messages/${row.id}: ${res.statusCode} ${res.body}`)
      }
    }
    run.commits++
    await sleep(rng.int(0, run.pace.pauseMs))
  }
}

/**
 * A scenario transaction writes its own rows: fresh ones from SCENARIO_IDS + 100 × slot, and reserved ones
 * (RESERVED + 10 × slot ...) it updates and deletes. Returns its transaction id.
 */
async function scenarioWrites (run: Run, tx: postgres.TransactionSql, rng: Rng, slot: number, label: string, round: number): Promise<bigint> {
  const ids = Array.from({ length: 3 }, (_, i) => SCENARIO_IDS + 100 * slot + 10 * round + i)
  await tx.unsafe(`INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rows(run, rng, ids, label, run.scenarioAuthor).join(', ')}`)
  const reserved = RESERVED + 10 * slot + 3 * round
  await tx.unsafe(`UPDATE messages SET content = ${lit(content(rng, label))}, priority = ${lit(rng.pick(PRIORITIES))} WHERE id IN (${reserved}, ${reserved + 1})`)
  await tx.unsafe(`DELETE FROM messages WHERE id = ${reserved + 2}`)
  const [row] = await tx<Array<{ x: string }>>`SELECT pg_current_xact_id()::text AS x`
  return BigInt(row!.x)
}

/**
 * PostgreSQL only: T1 begins and writes, T2 begins and writes, T2 commits, the client catches up
 * (an answer to a call begun after T2's commit says hasMore: false), and only then T1 commits. A feed
 * ordered by the moment of writing would have passed T1's id by then and skip its changes for ever.
 */
async function oppositeOrder (run: Run, rng: Rng): Promise<void> {
  const after = rng.int(0, 40)
  await until(run, () => run.commits >= after, 'writes before the opposite-order pair', writersStopped(run))
  const first = postgres(run.url, { max: 1, onnotice: () => {} })
  const second = postgres(run.url, { max: 1, onnotice: () => {} })
  try {
    let wrote!: (xid: bigint) => void
    const t1Wrote = new Promise<bigint>((resolve) => { wrote = resolve })
    let commitT1!: () => void
    const t1MayCommit = new Promise<void>((resolve) => { commitT1 = resolve })
    const t1 = first.begin(async (tx) => {
      wrote(await scenarioWrites(run, tx, rng, 0, 'T1 (began first, committed last)', 0))
      await t1MayCommit
    })
    const x1 = await Promise.race([t1Wrote, t1.then(() => { throw new Error('T1 ended before writing') })])
    let x2 = 0n
    await second.begin(async (tx) => { x2 = await scenarioWrites(run, tx, rng, 1, 'T2 (began second, committed first)', 0) })
    run.t.ok(x1 < x2, `T1 (xid ${x1}) began and wrote before T2 (xid ${x2}); T2 committed`)
    const committed = performance.now()
    const calls = run.client.calls
    // The regular writers wait meanwhile: at limit 1 they could write faster than the client reads.
    run.holds++
    try {
      await until(run, () => run.client.caughtUpAfter(committed), 'hasMore:false after T2 committed',
        () => run.client.calls - calls > MAX_CATCH_UP_CALLS ? `the client made ${MAX_CATCH_UP_CALLS} calls with no writer writing` : undefined)
    } finally {
      run.holds--
    }
    commitT1()
    await t1
    run.t.ok(run.client.calls > calls, `the client caught up (${run.client.calls - calls} calls) between T2's commit and T1's`)
  } finally {
    await Promise.all([first.end({ timeout: 5 }), second.end({ timeout: 5 })])
  }
}

/** PostgreSQL only: a transaction writes early, stays open across at least 10 polls while others commit, writes again and commits. */
async function longOpen (run: Run, rng: Rng): Promise<void> {
  const after = rng.int(0, 5)
  await until(run, () => run.commits >= after, 'writes before the long transaction', writersStopped(run))
  const session = postgres(run.url, { max: 1, onnotice: () => {} })
  try {
    await session.begin(async (tx) => {
      await scenarioWrites(run, tx, rng, 2, 'long-open transaction (early)', 0)
      const calls = run.client.calls
      const commits = run.commits
      await until(run, () => run.client.calls >= calls + 11 && run.commits >= commits + 10, '10 polls and 10 commits during the long transaction', writersStopped(run))
      await scenarioWrites(run, tx, rng, 2, 'long-open transaction (late)', 1)
      run.t.ok(run.client.calls - calls > 10, `the long transaction stayed open across ${run.client.calls - calls} calls and ${run.commits - commits} commits`)
    })
  } finally {
    await session.end({ timeout: 5 })
  }
}

/**
 * The client's own loop: calls again at once while hasMore is true, else polls after a random pause.
 * During the initial copy it waits for a write between its first pages, so the copy is made while
 * writers commit. (Which answers belong to the copy is read from the token, for that count only.)
 */
async function follow (run: Run, rng: Rng, stop: () => boolean): Promise<void> {
  const startCommits = run.commits
  let copying = true
  while (!stop() && run.failure === undefined) {
    const answer = await run.client.call()
    if (copying) {
      run.copyPages++
      copying = decodeSyncToken(run.client.next!).position.kind === 'snapshot'
      run.commitsDuringCopy = run.commits - startCommits
      if (!copying) run.commitsAtCopyEnd = run.commits
      if (copying && run.copyPages >= MAX_COPY_CALLS) throw new Error(`the initial copy did not end within ${MAX_COPY_CALLS} calls (${run.commits} writes committed)`)
      if (copying && run.copyPages < 4) {
        const seen = run.commits
        run.awaitingWrite = true
        try {
          await until(run, () => run.commits > seen, 'a write between two pages of the initial copy', writersStopped(run))
        } finally {
          run.awaitingWrite = false
        }
      }
    }
    if (!answer.hasMore) await sleep(rng.int(0, 8))
    else if (rng.chance(0.2)) await sleep(rng.int(0, 2))
  }
}

async function property (t: Test, limit: number, rng: Rng): Promise<void> {
  const started = performance.now()
  const { app, url } = await buildWithUrl(t)
  // alice (Admin) deletes through the API: provisioned first.
  await app.inject({ method: 'GET', url: '/v2/users/me', headers: { 'x-test-user': ADMIN } })
  await runSql(app, "INSERT INTO users (subject_id, name, email, role) SELECT 'sql-author-' || i, 'Author ' || i, 'a' || i || '@example.com', 'User' FROM generate_series(1, 6) i")
  const authors = (await rawRows<{ id: number }>(app, "SELECT id::float8 AS id FROM users WHERE subject_id LIKE 'sql-author-%' ORDER BY id")).map((r) => Number(r.id))
  await runSql(app, "INSERT INTO users (subject_id, name, email, role) VALUES ('scenario-author', 'Scenario author', NULL, 'User')")
  const run: Run = {
    t,
    app,
    url,
    client: new SyncClient(app, limit),
    origin: new Map(),
    authors,
    scenarioAuthor: "(SELECT id FROM users WHERE subject_id = 'scenario-author')",
    commits: 0,
    aborted: 0,
    rolledBack: 0,
    begun: 0,
    writersLeft: SQL_WRITERS + API_WRITERS,
    holds: 0,
    awaitingWrite: false,
    scenariosDone: !onPostgres,
    failure: undefined,
    copyPages: 0,
    commitsDuringCopy: 0,
    commitsAtCopyEnd: undefined,
    // At limit 1 the client reads one entry per call: fewer rows per write keep it within reach of the
    // writers. A write adds about 1 row past the copy's position at limit 1, 4 at the others: a
    // quarter of a write a page at limit 1 and limit / 10 at the others add well under half of what a
    // page reads.
    pace: limit === 1 ? { rows: 4, pauseMs: 12, writesPerPage: 0.25 } : { rows: 20, pauseMs: 6, writesPerPage: limit / 10 }
  }

  // Before the client starts: enough rows for the initial copy to span at least five pages, and the
  // rows only the scenario transactions touch.
  const preload = 5 * limit + 40
  const preloadIds = Array.from({ length: preload }, (_, i) => 100_000 + 10 * i + rng.int(0, 9))
  for (let i = 0; i < preloadIds.length; i += 200) {
    await runSql(app, `INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rows(run, rng, preloadIds.slice(i, i + 200), 'preload').join(', ')}`)
  }
  const reservedIds = Array.from({ length: 30 }, (_, i) => RESERVED + i)
  await runSql(app, `INSERT INTO ${COLUMNS} OVERRIDING SYSTEM VALUE VALUES ${rows(run, rng, reservedIds, 'reserved', run.scenarioAuthor).join(', ')}`)

  const writers: Writer[] = onPostgres
    ? Array.from({ length: SQL_WRITERS }, () => postgresWriter(url))
    : Array.from({ length: SQL_WRITERS }, () => pgliteWriter(app))
  t.teardown(async () => { await Promise.all(writers.map((w) => w.close())) })

  const guard = async (work: Promise<void>): Promise<void> => {
    try {
      await work
    } catch (err) {
      run.failure ??= err
      throw err
    }
  }
  const scenarios = async (): Promise<void> => {
    try {
      // PGlite runs one transaction at a time: a transaction held open would hold every other client
      // (the feed included) until it ends, so two commit orders and a transaction open across polls
      // cannot happen there. These two run on PostgreSQL only.
      if (onPostgres) await Promise.all([guard(oppositeOrder(run, new Rng(rng.int(0, 2 ** 30)))), guard(longOpen(run, new Rng(rng.int(0, 2 ** 30))))])
    } finally {
      run.scenariosDone = true
    }
  }
  const regular = async (writer: Promise<void>): Promise<void> => {
    try {
      await guard(writer)
    } finally {
      run.writersLeft--
    }
  }
  const work: Array<Promise<void>> = [
    ...writers.map((w, k) => regular(sqlWriter(run, k + 1, new Rng(rng.int(0, 2 ** 30)), w))),
    ...Array.from({ length: API_WRITERS }, (_, k) => regular(apiWriter(run, k + 1, new Rng(rng.int(0, 2 ** 30))))),
    scenarios()
  ]

  // The client starts once writers are running, and its initial copy is made while they write.
  const clientRng = new Rng(rng.int(0, 2 ** 30))
  await until(run, () => run.commits >= FIRST_WRITES, 'the first writes', writersStopped(run))
  let active = true
  const following = guard(follow(run, clientRng, () => !active))

  const settled = await Promise.allSettled(work)
  active = false
  await following.catch(() => {})
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected')
  if (failed !== undefined) throw failed.reason
  if (run.failure !== undefined) throw run.failure
  t.ok(run.copyPages >= 4, `the initial copy took ${run.copyPages} calls (limit ${limit}, ${preload} rows preloaded)`)
  t.ok(run.commitsDuringCopy >= 3, `writers committed ${run.commitsDuringCopy} writes while the initial copy was made`)
  const afterCopy = run.commits - (run.commitsAtCopyEnd ?? run.commits)
  t.ok(afterCopy >= AFTER_COPY, `writers committed ${afterCopy} writes after the initial copy ended (${run.begun} begun, at most ${MAX_WRITES})`)

  // Every writer has stopped; a call begun after every write transaction ended must bring the copy up to date.
  await quiesce(run.app)
  const mark = performance.now()
  const finalCalls = await run.client.syncAfter(mark)

  const table = await messagesAsServed(app)
  const copy = run.client.sorted()
  const labelled = (ids: number[]) => ids.slice(0, 20).map((id) => `${id} (${run.origin.get(id) ?? 'unknown'})`)
  const diff = differences(copy, table)
  t.strictSame({ missing: labelled(diff.missing), extra: labelled(diff.extra), differ: labelled(diff.differ) }, { missing: [], extra: [], differ: [] },
    `seed ${rng.seed}, limit ${limit}: the client's copy has no missing, extra or different message ` +
    `(${diff.missing.length} missing, ${diff.extra.length} extra, ${diff.differ.length} different)`)
  const ids = (await rawRows<{ id: number }>(app, 'SELECT id::float8 AS id FROM messages ORDER BY id')).map((r) => Number(r.id))
  t.strictSame(copy.map((m) => m.id), ids, `the copy's ids are SELECT id FROM messages (${ids.length} rows)`)
  t.strictSame(copy, table, 'the copy equals every message, row for row')

  // The reference is the API's own rendering: a sample compared with GET /v2/messages/{id}.
  for (const expected of rng.sample(table, 5)) {
    const res = await app.inject({ method: 'GET', url: `/v2/messages/${expected.id}` })
    t.strictSame({ status: res.statusCode, body: res.json() }, { status: 200, body: expected }, `GET /v2/messages/${expected.id} renders the row as the reference does`)
  }

  t.comment(`limit ${limit}: ${run.client.calls} calls (${run.copyPages} for the initial copy, ${finalCalls} after the writers stopped), ` +
    `${run.client.upserts} upserts, ${run.client.deletes} deletes applied; ${run.commits} writes committed, ` +
    `${run.rolledBack} rolled back, ${run.aborted} aborted by deadlock; ${ids.length} messages; ${Math.round(performance.now() - started)} ms`)
}

for (const { limit, seed: runSeed } of RUNS) {
  t.test(`limit ${limit}: a client following the feed holds exactly the messages table once writers stop (seed ${runSeed})`, async (t) => {
    await property(t, limit, new Rng(runSeed))
  })
}

/**
 * An app on real PostgreSQL in every run: TEST_DATABASE_URL's server, or else a throwaway one of the
 * machine's own binaries (as the replica test starts), since PGlite runs one transaction at a time and
 * cannot interleave two.
 */
async function buildOnPostgres (t: Test): Promise<{ app: App, url: string }> {
  if (onPostgres) return buildWithUrl(t)
  const cluster = await startPgCluster({ replica: false })
  t.teardown(() => cluster.stop())
  const admin = postgres(cluster.primaryUrl(), { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe('create database rename_race')
  } finally {
    await admin.end()
  }
  const url = cluster.primaryUrl('rename_race')
  const app = await buildApp(testConfig({ databaseUrl: url }), { logger: false, testAuth: true })
  t.teardown(() => app.close())
  return { app, url }
}

// The property above found this interleaving on PostgreSQL (in about one run in five); here it is
// step by step. A message's JSON shows its author's name, so a rename changes the message. The rename's
// trigger logs the author's messages its statement can see: not one inserted by a transaction still
// open. If that transaction commits first and the feed answers the new message before the rename
// commits, the client holds the old name, and nothing in the log ever sends the message again.
t.test('an author renamed while another transaction inserts a message of theirs (PostgreSQL)', async (t) => {
  const { app, url } = await buildOnPostgres(t)
  const client = new SyncClient(app, 100)
  const inserter = postgres(url, { max: 1, onnotice: () => {} })
  const renamer = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(async () => { await Promise.all([inserter.end({ timeout: 5 }), renamer.end({ timeout: 5 })]) })
  await inserter`INSERT INTO users (subject_id, name) VALUES ('author', 'Old name')`
  await client.syncAfter(performance.now())

  let updated = false
  let mayCommit!: () => void
  const commit = new Promise<void>((resolve) => { mayCommit = resolve })
  let renaming: Promise<unknown> | undefined
  await inserter.begin(async (tx) => {
    await tx`INSERT INTO messages (id, content, author_id) OVERRIDING SYSTEM VALUE VALUES (42, 'hello', (SELECT id FROM users WHERE subject_id = 'author'))`
    renaming = renamer.begin(async (tx) => {
      await tx`UPDATE users SET name = 'New name' WHERE subject_id = 'author'`
      updated = true
      await commit
    })
    // The insert commits once the rename's UPDATE has run, or waits for this transaction's locks (as
    // it might once this is fixed by locking): either way the rename began before the insert committed.
    const start = performance.now()
    for (;;) {
      // pg_stat_activity is read once per transaction unless its snapshot is cleared.
      await tx`SELECT pg_stat_clear_snapshot()`
      const [waiting] = await tx<Array<{ n: number }>>`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE users%'`
      if (updated || (waiting?.n ?? 0) > 0) break
      if (performance.now() - start > WAIT_MS) throw new Error('the rename neither ran nor waited')
      await sleep(5)
    }
  })
  // The insert has committed; the rename has not. The client polls (and may get message 42 already).
  await client.syncAfter(performance.now())
  mayCommit()
  await renaming
  await quiesce(app)
  await client.syncAfter(performance.now())
  const res = await app.inject({ method: 'GET', url: '/v2/messages/42' })
  t.strictSame(client.sorted(), [res.json()], 'after the rename commits, the client holds message 42 as GET /v2/messages/42 shows it')
})
