/**
 * Runs a bounded delete again and again, each run its own short transaction, until one deletes fewer
 * rows than a batch (nothing is left) or `maxBatches` have run; returns how many rows went in all.
 * Background pruning uses it, so it never holds locks for long nor runs without end.
 */
export async function inBatches (deleteBatch: (batch: number) => Promise<number>, batch: number, maxBatches: number): Promise<number> {
  let total = 0
  for (let run = 0; run < maxBatches; run++) {
    const n = await deleteBatch(batch)
    total += n
    if (n < batch) break
  }
  return total
}
