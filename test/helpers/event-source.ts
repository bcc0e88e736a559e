import { EventSource, type FetchLike } from 'eventsource'
import type { Test } from 'tap'
import { Agent, fetch } from 'undici'
import { type Answer, LiveCopy } from './live.js'

// An EventSource client from the `eventsource` package (the WHATWG algorithm, as browsers run it),
// applying every event to an offline copy, and counting what a user would notice: connections opened
// (each one after the first is a reconnection) and errors. Its connections use an agent of their own,
// destroyed when the test ends.

export interface EventSourceClient {
  readonly copy: LiveCopy
  /** Connections opened: 1 means it never reconnected. */
  opens: number
  /** Problems seen: errors, malformed events. */
  readonly problems: string[]
  /** The Last-Event-ID header of each request it made (undefined for none). */
  readonly lastEventIds: Array<string | undefined>
  /** The byte size of each event's data. */
  readonly eventBytes: number[]
  /** Waits until `ready()` holds; fails after `ms`. */
  until: (ready: () => boolean, what: string, ms?: number) => Promise<void>
  close: () => void
}

export function openEventSource (t: Test, url: string, name: string): EventSourceClient {
  const agent = new Agent()
  const copy = new LiveCopy(name)
  const client: EventSourceClient = {
    copy,
    opens: 0,
    problems: [],
    lastEventIds: [],
    eventBytes: [],
    async until (ready, what, ms = 120_000) {
      const deadline = performance.now() + ms
      while (!ready()) {
        if (client.problems.length > 0) throw new Error(`${name}: ${client.problems.join('; ')} (waiting for ${what})`)
        if (performance.now() > deadline) throw new Error(`${name}: no ${what} within ${ms} ms`)
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    },
    close () {
      source.close()
    }
  }
  const fetcher: FetchLike = async (input, init) => {
    const headers = init.headers as Record<string, string> | undefined
    client.lastEventIds.push(headers?.['Last-Event-ID'])
    return await fetch(String(input), { ...init, dispatcher: agent })
  }
  const source = new EventSource(url, { fetch: fetcher })
  source.addEventListener('open', () => { client.opens++ })
  source.addEventListener('changes', (event) => {
    try {
      const answer = JSON.parse(event.data) as Answer
      if (event.lastEventId !== answer.next) client.problems.push('an event id that is not the answer\'s next')
      client.eventBytes.push(Buffer.byteLength(event.data))
      copy.apply(answer, `event ${copy.answers + 1}`)
    } catch (err) {
      client.problems.push(`event ${copy.answers + 1}: ${String(err)}`)
    }
  })
  source.addEventListener('error', (event) => {
    // A dropped connection is an error event too, followed by a reconnection; only a refusal has a code.
    const code = (event as { code?: number }).code
    if (code !== undefined) client.problems.push(`error ${code}: ${String((event as { message?: string }).message)}`)
  })
  t.teardown(async () => {
    source.close()
    await agent.destroy()
  })
  return client
}
