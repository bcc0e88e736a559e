/**
 * A steady writer beside a row's load: one create through the API every `intervalMs`, one at a time,
 * as a messaging API is written while it is read. Every write changes the table's version, so that no
 * page cache or anchor of an earlier version can answer a page: each one is read as it is under writes.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { request } from 'undici'

export interface WriterResult {
  /** Creates answered 201. */
  created: number
  /** Creates answered otherwise, or not at all; the first answer of each kind. */
  failed: number
  problems: string[]
  seconds: number
}

export interface SteadyWriter { stop: () => Promise<WriterResult> }

/**
 * Posts `bodies` in turn to `${base}/v2/messages` with `token` until stopped, or until `maxWrites`. A
 * write that takes longer than the interval delays the next one: the rate is at most 1000 / intervalMs.
 */
export function startWriter (base: string, token: string, bodies: readonly string[], intervalMs: number, maxWrites: number): SteadyWriter {
  const state = { stopped: false }
  const result: WriterResult = { created: 0, failed: 0, problems: [], seconds: 0 }
  const began = performance.now()
  const loop = (async () => {
    for (let n = 0; n < maxWrites && !state.stopped; n++) {
      const due = began + n * intervalMs
      const wait = due - performance.now()
      if (wait > 0) await sleep(wait)
      if (state.stopped) break
      try {
        const response = await request(`${base}/v2/messages`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: bodies[n % bodies.length]!,
          headersTimeout: 10_000,
          bodyTimeout: 10_000
        })
        const text = await response.body.text()
        if (response.statusCode === 201) result.created++
        else {
          result.failed++
          if (result.problems.length < 3) result.problems.push(`a write answered ${response.statusCode}: ${text.slice(0, 80)}`)
        }
      } catch (err) {
        result.failed++
        if (result.problems.length < 3) result.problems.push(`a write failed: ${(err as Error).message}`)
      }
    }
  })()
  return {
    async stop () {
      state.stopped = true
      await loop
      result.seconds = (performance.now() - began) / 1000
      return result
    }
  }
}
