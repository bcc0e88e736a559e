/**
 * The other clients of the fairness row (fair.ts): a few SSE streams of GET /v2/messages/changes, each
 * from a loopback address of its own (127.0.0.2, 127.0.0.3 …, so the service counts each as another
 * client), read at full speed in this process. Each records when its headers and its first event came,
 * and when it first received each message id.
 */
import { request, type ClientRequest } from 'node:http'
import { wallClock } from './protocol.js'

export interface FairStream {
  readonly address: string
  /** Wall-clock milliseconds (protocol.ts) of the request, its headers and its first event; undefined until they come. */
  readonly requestedAt: number
  headersAt: number | undefined
  firstEventAt: number | undefined
  status: number | undefined
  /** When each message id first came (an upsert or a delete of it). */
  readonly received: Map<number, number>
  /** The response ended or failed. */
  ended: boolean
  error: string | undefined
  close: () => void
}

interface Entry { id: number }

/** Opens a stream at `since` from `address`. */
export function openFairStream (base: string, since: string, address: string): FairStream {
  let text = ''
  const stream: FairStream = {
    address,
    requestedAt: wallClock(),
    headersAt: undefined,
    firstEventAt: undefined,
    status: undefined,
    received: new Map(),
    ended: false,
    error: undefined,
    close: () => {}
  }
  // One event per blank line; its data line is the answer's JSON.
  const receive = (chunk: string): void => {
    text += chunk
    let end = text.indexOf('\n\n')
    while (end >= 0) {
      const block = text.slice(0, end)
      text = text.slice(end + 2)
      end = text.indexOf('\n\n')
      const data = block.split('\n').find((line) => line.startsWith('data: '))
      if (data === undefined) continue
      const at = wallClock()
      stream.firstEventAt ??= at
      for (const entry of (JSON.parse(data.slice(6)) as { data: Entry[] }).data) if (!stream.received.has(entry.id)) stream.received.set(entry.id, at)
    }
  }
  const req: ClientRequest = request(`${base}/v2/messages/changes?since=${since}`, { agent: false, localAddress: address, headers: { accept: 'text/event-stream' } }, (response) => {
    stream.headersAt = wallClock()
    stream.status = response.statusCode
    response.setEncoding('utf8')
    response.on('data', receive)
    response.on('error', () => {})
    response.on('close', () => { stream.ended = true })
  })
  req.on('error', (err) => {
    stream.ended = true
    stream.error ??= err.message
  })
  req.end()
  stream.close = () => { req.destroy() }
  return stream
}
