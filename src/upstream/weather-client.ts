// weather-client: the only way the API talks to the weather upstream (SPEC 4.8, CONTRACT 6 and 10).
import { Pool, type Dispatcher } from 'undici'
import { UpstreamStatusError, WeatherUnreachableError } from '../errors.js'

export interface WeatherClientOptions {
  /** WEATHER_API_URL, e.g. https://api.openweathermap.org/data/2.5/weather */
  url: string
  apiKey: string
  /** Whole-request budget: connect, headers and body. */
  timeoutMs?: number
}

export interface WeatherResult {
  status: number
  body: Record<string, unknown>
}

export interface WeatherClient {
  /** The upstream JSON for one city; throws WeatherUnreachableError (502) or UpstreamStatusError (mirrored status). */
  current: (city: string) => Promise<WeatherResult>
  close: () => Promise<void>
}

const UPSTREAM_FAILED = 'Weather API error'
// A weather answer is a few KiB; anything far larger is not one, and is never buffered whole.
const MAX_BODY_BYTES = 1024 * 1024
const MAX_MESSAGE_LENGTH = 500

class BodyTooLarge extends Error {}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

function parseJson (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

async function readText ({ headers, body }: Pick<Dispatcher.ResponseData, 'headers' | 'body'>): Promise<string> {
  // A declared length over the cap is refused before reading, instead of waiting for that body.
  if (Number(headers['content-length']) > MAX_BODY_BYTES) {
    body.destroy()
    throw new BodyTooLarge()
  }
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > MAX_BODY_BYTES) {
      body.destroy()
      throw new BodyTooLarge()
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}

// Mirrorable statuses (SPEC 4.8): a 3xx is never followed (CONTRACT 10) but answered as-is. A 304
// can carry no body and anything outside 300..599 cannot be sent, so those become 502.
function mirroredStatus (status: number): number {
  return status >= 300 && status <= 599 && status !== 304 ? status : 502
}

function statusError (status: number, message: string): InstanceType<typeof UpstreamStatusError> {
  const error = new UpstreamStatusError(message)
  error.statusCode = mirroredStatus(status)
  return error
}

export function createWeatherClient ({ url, apiKey, timeoutMs = 5000 }: WeatherClientOptions): WeatherClient {
  const base = new URL(url)
  // One pool bound to the configured origin: no request can leave for another host. No redirect
  // interceptor is installed, so undici never follows a 3xx.
  const pool = new Pool(base.origin, {
    connect: { timeout: timeoutMs },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs
  })

  // The key must not leak through an upstream that echoes it, nor through a logged error.
  const secrets = [...new Set([apiKey, encodeURIComponent(apiKey), new URLSearchParams({ k: apiKey }).toString().slice(2)])]
    .filter((s) => s !== '')
  const redact = (text: string): string => secrets.reduce((acc, secret) => acc.split(secret).join('[redacted]'), text)
  const redactDeep = (value: unknown): unknown => {
    if (typeof value === 'string') return redact(value)
    if (Array.isArray(value)) return value.map(redactDeep)
    if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [redact(k), redactDeep(v)]))
    return value
  }

  // The logged cause keeps the name, code and (redacted) message of the transport failure, and
  // nothing else: undici errors can hold sockets, request options and the full URL.
  function unreachable (err: unknown): InstanceType<typeof WeatherUnreachableError> {
    const source = err instanceof Error ? err : new Error(String(err))
    const cause = new Error(redact(source.message))
    cause.name = source.name
    const code = (source as { code?: unknown }).code
    if (typeof code === 'string') Object.assign(cause, { code })
    return new WeatherUnreachableError({ cause })
  }

  async function current (city: string): Promise<WeatherResult> {
    const target = new URL(base)
    // searchParams encodes the city, so it can only ever be the value of q.
    target.searchParams.set('q', city)
    target.searchParams.set('appid', apiKey)
    target.searchParams.set('units', 'metric')

    let status: number
    let text: string
    try {
      const response = await pool.request({
        method: 'GET',
        path: `${target.pathname}${target.search}`,
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(timeoutMs)
      })
      status = response.statusCode
      text = await readText(response)
    } catch (err) {
      if (err instanceof BodyTooLarge) throw statusError(502, UPSTREAM_FAILED)
      throw unreachable(err)
    }

    const parsed = redactDeep(parseJson(text))
    if (status >= 200 && status < 300) {
      if (!isObject(parsed)) throw statusError(502, UPSTREAM_FAILED)
      return { status, body: parsed }
    }
    const message = isObject(parsed) && typeof parsed.message === 'string' && parsed.message.trim() !== ''
      ? parsed.message.slice(0, MAX_MESSAGE_LENGTH)
      : UPSTREAM_FAILED
    throw statusError(status, message)
  }

  return {
    current,
    close: () => pool.close()
  }
}
