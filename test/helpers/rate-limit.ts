// Retry-After on a 429 of the rate limit (CONTRACT 11) is what is left of the caller's one-minute
// window, in whole seconds rounded up: 60 right after the window opened, less when more than a second
// passed between its first request and the refusal, as on a busy machine. Tests compare the header
// through restOfWindow, so that their outcome does not depend on the machine's speed.

export const REST_OF_WINDOW = 'the rest of the window (1-60 s)'

/** REST_OF_WINDOW when `value` is a whole number of seconds within the window, else the value itself. */
export function restOfWindow (value: unknown): unknown {
  const seconds = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : Number.NaN
  return seconds >= 1 && seconds <= 60 ? REST_OF_WINDOW : value
}
