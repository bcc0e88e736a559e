/** What a row of the benchmark is: the requests of one measurement, and how its answers are checked. */
import type { CannonRequest } from '../load/autocannon.js'
import type { Tokens } from '../run/caller-tokens.js'
import type { Answers, PageExpectation, PeerVerify } from '../checks/answer-checks.js'
import { BenchError } from '../run/bench-error.js'
import type { Oracle } from '../checks/reference-sql.js'
import type { Measurement, Target } from '../report/bench-report.js'
import type { Server } from '../servers/child-servers.js'
import type { SteadyWriter } from '../load/steady-writer.js'

export interface Row {
  key: string
  name: string
  targets: readonly Target[]
  /** Builds the autocannon request options for one server (POST needs fresh subjects per server). */
  requests: (target: Target) => CannonRequest[]
  /** Sampled check of a response body; returns a problem or undefined. */
  verify?: (body: string) => string | undefined
  /** List rows: the path checked once before and once after the load. */
  page?: { path: string, expect: PageExpectation }
  /** POST: the message count must grow by exactly the number of 201 responses. */
  countsWrites?: boolean
  /** Statuses besides 2xx that count as success (a revalidation's 304). */
  alsoOk?: readonly number[]
  /** The row of this run the service's rate is compared with, and the ratio it must reach. */
  reference?: { key: string, target: number }
  /** Runs once before the row is measured (the delta sync poll's walk to a caught-up token). */
  prepare?: () => Promise<void>
  /** Cold rows: each request asks for the next path of a fixed sequence instead of `requests`. */
  sequence?: Sequence
  /** Seconds, when the row runs longer than --duration (the random mix). */
  duration?: number
  /** A writer started beside the row's load and stopped after it (the cold rows under writes). */
  writer?: (child: Server) => SteadyWriter
  /** The row as the Platformatic peer is asked it, for the rows it has an equivalent of. */
  platformatic?: PeerRow
  /**
   * A row of several loads in one window, each from a client address of its own (the search flood): it
   * runs them itself in place of `requests`, and each load is reported as a row of its own.
   */
  together?: (child: Server, window: { seconds: number, maxRequests: number }) => Promise<TogetherPart[]>
}

/** One load of a `together` row, as reported. */
export interface TogetherPart {
  key: string
  name: string
  measurement: Measurement
}

/**
 * A row for the Platformatic peer (bench/servers/platformatic-peer.ts): its own requests, and checks that see the headers,
 * since a page's total is a header there (X-Total-Count), not a member of the body.
 */
export interface PeerRow {
  requests: () => CannonRequest[]
  /** Check of a sampled 2xx answer; returns a problem or undefined. */
  verify: PeerVerify
  /** List rows: the peer's path, checked once before and once after the load. */
  page?: string
  /** The one status every answer must have (POST: Platformatic creates with 200, not 201). */
  status?: number
}

/**
 * The requests of a cold row: distinct pages or terms in a fixed-seed order, the same for every server, so
 * no answer is asked for twice and no cache can serve it. A row stops at the end of its sequence.
 */
export interface Sequence {
  paths: string[]
  /** The exact answer to one path, from the oracle; sampled answers are checked against it after the row. */
  expect: (path: string) => Promise<PageExpectation>
  /** Goes round again at the end instead of stopping there (the random mix, bounded by time). */
  repeat?: boolean
  /** Keeps every n-th answer for checking (default VERIFY_EVERY). */
  sampleEvery?: number
}

/** What the row builders read: the oracle, the rows asked for, the callers, the running service. */
export interface RowContext {
  /** None on a target (--target): the rows that need it are skipped there (ROW_NEEDS in ./index.ts). */
  oracle?: Oracle
  /** The expected answers: the oracle's, or on a target its stated totals and the answers' shape. */
  answers: Answers
  wanted: (key: string) => boolean
  tokens: Tokens
  service: Server
  maxRequests: number
  /** The messages in the table when the rows are built. */
  total: number
}

/** Builds the rows of one family that `wanted` asks for, in the order they run. */
export type RowBuilder = (context: RowContext) => Promise<Row[]>

/** The oracle of a row that cannot run without the database, which ROW_NEEDS keeps off a target. */
export function requireOracle (oracle: Oracle | undefined, key: string): Oracle {
  if (oracle === undefined) throw new BenchError(`the row ${key} needs the database`)
  return oracle
}
