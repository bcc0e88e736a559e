/**
 * How much the property and load tests do: TEST_PROPERTY_SCALE multiplies their writes, pages and runs.
 * The default, 1, keeps `npm test` short on a two-core machine; CI's PostgreSQL pass sets it higher,
 * and a failure at any size replays with the seed it prints.
 */
export const PROPERTY_SCALE = scaleFromEnv()

function scaleFromEnv (): number {
  const given = process.env.TEST_PROPERTY_SCALE
  if (given === undefined || given === '') return 1
  const scale = Number(given)
  if (!Number.isFinite(scale) || scale <= 0) throw new Error(`TEST_PROPERTY_SCALE must be a positive number, not ${JSON.stringify(given)}`)
  return scale
}

/** `n` at the scale of this run, rounded, and never below `least`. */
export function scaled (n: number, least = 1): number {
  return Math.max(least, Math.round(n * PROPERTY_SCALE))
}
