/** The order of a cold row's requests: distinct values in a fixed-seed random order, the same every run. */
import { createRandom } from '../../scripts/seeded-random.js'

/** The first `count` of 1..n in the random order of `seed`, without repeats (a partial Fisher-Yates shuffle). */
export function shuffled (n: number, count: number, seed: number): number[] {
  const random = createRandom(seed)
  const values = Array.from({ length: n }, (_, i) => i + 1)
  const take = Math.min(n, count)
  for (let i = 0; i < take; i++) {
    const j = i + Math.floor(random() * (n - i))
    const chosen = values[j]!
    values[j] = values[i]!
    values[i] = chosen
  }
  return values.slice(0, take)
}
