/** Rejects instead of hanging when a promise (typically an injected request) does not settle in time. */
export async function bounded<T> (promise: Promise<T>, ms = 15_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * The bound that proves a request without an answer from upstream was given up rather than left hanging
 * (undici would wait 300 s for headers, a trickled body forever). Far above any machine's scheduling
 * delay: 7 s for a 5 s budget failed in CI on a slow day, measuring the machine, not the code.
 */
export const NOT_HUNG_MS = 60_000
