/**
 * The deterministic generator shared by the seed (scripts/seed.ts) and the load benchmark (bench/): the
 * same seed gives the same data and the same request order on every run.
 */

/** mulberry32: a small deterministic generator, so the same seed gives the same data. */
export function createRandom (seed: number): () => number {
  let a = seed >>> 0
  return function random () {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
