import { sql } from 'drizzle-orm'
import type { Test } from 'tap'
import { buildApp, type App } from '../../src/app.js'
import type { AppConfig } from '../../src/config.js'
import { testConfig } from './build.js'
import { freshDatabase } from './database.js'
import { queryRows } from './fixtures.js'
import { cursorKinds, pagination } from './pagination.js'
import { scaled } from './scale.js'

/**
 * Shared machinery of the exactness tests: every page and total the API answers is compared with a
 * naive reference query run on the same database (ORDER BY <col> <dir>, id ASC, count(*)).
 */

/** A small seeded PRNG (mulberry32), so a failing run can be replayed with EXACTNESS_SEED. */
export class Rng {
  private state: number
  constructor (readonly seed: number) { this.state = seed >>> 0 }
  next (): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0
    let x = this.state
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }

  /** An integer in [from, to]. */
  int (from: number, to: number): number { return from + Math.floor(this.next() * (to - from + 1)) }
  pick<T> (items: readonly T[]): T { return items[Math.floor(this.next() * items.length)]! }
  chance (p: number): boolean { return this.next() < p }
  sample<T> (items: readonly T[], n: number): T[] {
    const copy = [...items]
    for (let i = copy.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [copy[i], copy[j]] = [copy[j]!, copy[i]!]
    }
    return copy.slice(0, n)
  }
}

export function seedFromEnv (): number {
  const given = process.env.EXACTNESS_SEED
  return given !== undefined && given !== '' ? Number(given) : Math.floor(Math.random() * 2 ** 31)
}

/** The error lines each app built by buildWithUrl logged. */
const serverErrors = new WeakMap<App, string[]>()

/** A fresh app with the test stub on a fresh database, plus that database's URL (for a COPY client). */
export async function buildWithUrl (t: Test, config: Partial<AppConfig> = {}): Promise<{ app: App, url: string }> {
  const database = await freshDatabase()
  const logged: string[] = []
  // Only what the server logs as an error, kept to explain an answer that is not 200 (its cause: the
  // driver's error, say), which the answer's body rightly leaves out.
  const logger = { level: 'error', stream: { write (line: string) { logged.push(line.slice(0, 4000)) } } }
  const app = await buildApp(testConfig({ ...config, databaseUrl: database.dataDir === undefined ? database.url : undefined }), { logger, testAuth: true, dataDir: database.dataDir })
  serverErrors.set(app, logged)
  t.teardown(async () => {
    await app.close()
    await database.drop()
  })
  return { app, url: database.url }
}

/** An SQL literal for a value this test generated itself. */
export function lit (value: string | number | null): string {
  if (value === null) return 'NULL'
  if (typeof value === 'number') return String(value)
  return `'${value.replace(/'/g, "''")}'`
}

export async function rawRows<T extends Record<string, unknown>> (app: App, text: string): Promise<T[]> {
  return queryRows<T>(app.db, sql.raw(text))
}

export async function run (app: App, text: string): Promise<void> {
  await app.db.execute(sql.raw(text))
}

export const ADMIN = JSON.stringify({ sub: 'alice', role: 'Admin' })

/** One collection query: the API's parameters and the reference's WHERE clause and sort column. */
export interface Combination {
  path: string
  /** Query parameters besides page and limit (filters, sort, order, q). */
  params: Record<string, string>
  table: string
  where: string
  orderColumn: string
  desc: boolean
}

export interface Mismatch { url: string, problem: string, expected?: unknown, got?: unknown, logged?: string[] }

export const LIMITS = [1, 7, 25, 100] as const
/** How many of LIMITS a combination is asked at by default: 1, and 2 at TEST_PROPERTY_SCALE=3. */
const LIMITS_PER_COMBINATION = Math.min(LIMITS.length, scaled(2 / 3))

/** The pages worth asking for at this total and limit: 1, 2, middle, last, last+1 and a random one. */
export function pagesToCheck (rng: Rng, total: number, limit: number): number[] {
  const last = Math.max(1, Math.ceil(total / limit))
  const pages = new Set([1, 2, Math.max(1, Math.ceil(last / 2)), last - 1, last, last + 1, rng.int(1, last + 1)])
  return [...pages].filter((p) => p >= 1).sort((a, b) => a - b)
}

/** The reference order of every matching id, from a naive query. */
export async function referenceIds (app: App, c: Combination): Promise<number[]> {
  const rows = await rawRows<{ id: number }>(app,
    `SELECT id::int AS id FROM ${c.table} WHERE ${c.where} ORDER BY ${c.orderColumn} ${c.desc ? 'DESC' : 'ASC'}, id ASC`)
  return rows.map((r) => Number(r.id))
}

export interface CheckOptions {
  headers?: Record<string, string>
  /** How many of LIMITS (1, 7, 25, 100) each combination is asked at, sampled anew each time (LIMITS_PER_COMBINATION). */
  limitsPerCombination?: number
  /** Compares the items of a page with the rows (field by field); returns a problem or null. */
  checkItems?: (ids: number[], items: unknown[]) => Promise<string | null>
  /** How often (0..1) checkItems runs on a non-empty page. */
  itemRate?: number
}

/**
 * Asks the API for the chosen pages of one combination at every limit and compares ids in exact
 * order and the pagination block with the reference. Returns the mismatches and the request count.
 */
export async function checkCombination (app: App, rng: Rng, c: Combination, options: CheckOptions = {}): Promise<{ mismatches: Mismatch[], requests: number }> {
  const expectedAll = await referenceIds(app, c)
  const total = expectedAll.length
  const mismatches: Mismatch[] = []
  let requests = 0
  for (const limit of rng.sample(LIMITS, options.limitsPerCombination ?? LIMITS_PER_COMBINATION)) {
    for (const page of pagesToCheck(rng, total, limit)) {
      const query = new URLSearchParams({ ...c.params, page: String(page), limit: String(limit) })
      const url = `${c.path}?${query.toString()}`
      requests++
      const res = await app.inject({ method: 'GET', url, headers: options.headers })
      if (res.statusCode !== 200) {
        mismatches.push({ url, problem: `status ${res.statusCode}`, got: res.body, logged: serverErrors.get(app)?.slice(-3) })
        continue
      }
      const body = res.json() as { data: Array<{ id: number }>, pagination: unknown }
      const expectedIds = expectedAll.slice((page - 1) * limit, page * limit)
      const gotIds = body.data.map((item) => item.id)
      const expectedPagination = pagination(page, limit, total, expectedIds.length)
      if (JSON.stringify(Object.keys(body)) !== '["data","pagination"]') {
        mismatches.push({ url, problem: 'top-level keys', expected: ['data', 'pagination'], got: Object.keys(body) })
      }
      if (JSON.stringify(gotIds) !== JSON.stringify(expectedIds)) {
        mismatches.push({ url, problem: 'ids', expected: expectedIds, got: gotIds })
      }
      if (JSON.stringify(cursorKinds(body).pagination) !== JSON.stringify(expectedPagination)) {
        mismatches.push({ url, problem: 'pagination', expected: expectedPagination, got: body.pagination })
      }
      if (options.checkItems !== undefined && gotIds.length > 0 && rng.chance(options.itemRate ?? 0.25)) {
        const problem = await options.checkItems(gotIds, body.data)
        if (problem !== null) mismatches.push({ url, problem })
      }
    }
  }
  return { mismatches, requests }
}

/** Runs every combination and makes one assertion that fails with the first mismatches listed. */
export async function assertExact (t: Test, app: App, rng: Rng, label: string, combinations: Combination[], options: CheckOptions = {}): Promise<void> {
  const mismatches: Mismatch[] = []
  let requests = 0
  for (const c of combinations) {
    const result = await checkCombination(app, rng, c, options)
    mismatches.push(...result.mismatches)
    requests += result.requests
  }
  t.strictSame(mismatches.slice(0, 8), [],
    `${label}: ${requests} requests over ${combinations.length} combinations exact (seed ${rng.seed}, ${mismatches.length} mismatches)`)
}

/** SQL that renders a timestamptz as the API's ISO string (millisecond precision, UTC). */
export const isoSql = (column: string): string =>
  `to_char(date_trunc('milliseconds', ${column}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
