/** The pause between two measurements, so that none is charged with the work another left running. */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Oracle } from '../checks/reference-sql.js'

const SETTLE_TIMEOUT_MS = 30_000

/**
 * Lets the database fall quiet before the next measurement. When autocannon stops, the naive server's
 * slow queries (seconds each under load) keep running on its connections, and on a small machine they
 * would take CPU from whatever is measured next: they are cancelled, then every other backend of this
 * database is waited for until none is active.
 */
export async function settle (oracle: Oracle): Promise<void> {
  // The embedded database has no other session: the service's last query ended with its last answer.
  if (!oracle.live) return
  await oracle.rows(`select pg_cancel_backend(pid) from pg_stat_activity
    where datname = current_database() and application_name = 'bench-baseline' and state = 'active'`)
  const deadline = Date.now() + SETTLE_TIMEOUT_MS
  while (Date.now() < deadline) {
    const [row] = await oracle.rows<{ n: number }>(`select count(*)::int as n from pg_stat_activity
      where datname = current_database() and state = 'active' and pid <> pg_backend_pid()`)
    if (row!.n === 0) return
    await sleep(100)
  }
}
