import { DatabaseUnavailableError, DrainingError } from '../errors.js'

export interface ReadinessChecks {
  /** True from the moment a shutdown signal arrives (CONTRACT 11). */
  isDraining: () => boolean
  /** A trivial statement on the database; throws when it does not answer. */
  pingDatabase: () => Promise<void>
}

/**
 * Readiness: ready while the database answers, not once shutdown has begun, so a load balancer stops
 * sending traffic. Both refusals are 503.
 */
export async function checkReadiness ({ isDraining, pingDatabase }: ReadinessChecks): Promise<{ ok: true }> {
  // An expected answer, not a failure: the error handler logs it at debug.
  if (isDraining()) throw new DrainingError()
  try {
    await pingDatabase()
  } catch (err) {
    // A real outage: one error line, whose err carries the driver's error as its cause.
    throw new DatabaseUnavailableError({ cause: err })
  }
  return { ok: true }
}
