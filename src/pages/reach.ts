// How many rows a page's statement reads beyond its starting position. A page from an anchor skips
// up to a stride of rows before its own, and the statement reads them with a constant LIMIT, so that
// PostgreSQL keeps one generic plan for it (a LIMIT parameter lost it: see ./locate.ts). One
// constant for every page read the most any page could need: 355 rows from an anchor for a page of
// 25 that needs 153 on average. Each statement now comes in a few sizes, and a page uses the smallest
// that holds it; each size keeps its own generic plan.

/** The sizes below the most a statement may read: small ones for pages near their start, then every 64 rows. */
const SIZES = [32, 64, 128, 192, 256, 320, 384, 448, 512, 576]

/**
 * The rows a statement reads for a page that needs `needed` of them (its skip plus its limit), when
 * no page needs more than `most`: the smallest size that holds them, else `most`.
 */
export function reachFor (needed: number, most: number): number {
  for (const size of SIZES) {
    if (size >= most) break
    if (size >= needed) return size
  }
  return most
}
