/** A failure of the benchmark itself: reported as its message alone, without a stack. */
export class BenchError extends Error {}
