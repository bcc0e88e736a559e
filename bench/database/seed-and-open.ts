/** The database a run measures: seeded when it holds too few messages, and the oracle that reads it. */
import { cpSync, rmSync } from 'node:fs'
import { formatSummary, seedDatabase } from '../../scripts/seed.js'
import { BenchError } from '../run/bench-error.js'
import { EMBEDDED_DATA_DIR, EMBEDDED_ORACLE_DIR } from '../run/locations.js'
import { pgliteOracle, postgresOracle, type Oracle } from '../checks/reference-sql.js'
import type { BenchReport } from '../report/bench-report.js'

const SEED_USERS = 1000

/** Where the data is: PostgreSQL at `databaseUrl`, or the embedded database of the benchmark's own directory. */
export interface DatabasePlan { embedded: boolean, databaseUrl: string, messages: number }

/**
 * Tops the database up to `messages` and prints the seed's summary. On the embedded database the oracle's
 * copy is taken now, before the service opens the directory. Returns what this run inserted, if anything.
 */
export async function prepareDatabase ({ embedded, databaseUrl, messages }: DatabasePlan): Promise<BenchReport['seed']> {
  let seeded
  try {
    seeded = await seedDatabase({ url: embedded ? undefined : databaseUrl, dataDir: embedded ? EMBEDDED_DATA_DIR : undefined, messages, users: SEED_USERS, ifEmpty: true })
  } catch (err) {
    throw new BenchError(`cannot prepare the database at ${embedded ? EMBEDDED_DATA_DIR : 'DATABASE_URL'}: ${(err as Error).message}`)
  }
  process.stdout.write(formatSummary(seeded) + '\n')
  if (embedded) {
    rmSync(EMBEDDED_ORACLE_DIR, { recursive: true, force: true })
    cpSync(EMBEDDED_DATA_DIR, EMBEDDED_ORACLE_DIR, { recursive: true })
  }
  return seeded.insertedMessages > 0 ? { messages: seeded.insertedMessages, seconds: seeded.seconds } : undefined
}

export async function openOracle ({ embedded, databaseUrl }: DatabasePlan): Promise<Oracle> {
  return embedded ? await pgliteOracle(EMBEDDED_ORACLE_DIR, EMBEDDED_DATA_DIR) : await postgresOracle(databaseUrl)
}
