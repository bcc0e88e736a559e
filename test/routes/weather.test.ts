import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import t, { type Test } from 'tap'
import weatherRoutes from '../../routes/weather/index.js'
import type { App } from '../../src/app.js'
import { NOT_HUNG_MS } from '../helpers/bounded.js'
import { build } from '../helpers/build.js'

const KEY = 'k-secret'
const PATH = '/data/2.5/weather'
const USER = { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User' }) }
// Every character that could change host, path or query if it were concatenated into the URL.
const ODD_CITY = 'Saint Denis & Co/../?x=1#frag ..\\%20 São Paulo 北京 🌧'

interface Server {
  url: string
  /** Every request the server received, as parsed URLs. */
  seen: URL[]
  close: () => Promise<void>
}

async function listen (t: Test, handler: (url: URL, res: ServerResponse) => void): Promise<Server> {
  const seen: URL[] = []
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://upstream.invalid')
    seen.push(url)
    handler(url, res)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const close = async (): Promise<void> => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  t.teardown(close)
  return { url: `http://127.0.0.1:${port}${PATH}`, seen, close }
}

function json (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers })
  res.end(JSON.stringify(body))
}

const forecast = (city: string): Record<string, unknown> => ({
  coord: { lon: -0.1257, lat: 51.5085 },
  weather: [{ id: 803, main: 'Clouds', description: 'broken clouds', icon: '04d' }],
  main: { temp: 14.2, humidity: 72 },
  extra: { nested: [1, 'two', null, true] },
  name: city,
  cod: 200
})

/** A weather upstream whose answer depends on the city asked for. */
async function startUpstream (t: Test, decoyUrl = 'http://127.0.0.1:9/'): Promise<Server> {
  return await listen(t, (url, res) => {
    const city = url.searchParams.get('q') ?? ''
    switch (city) {
      case 'Nowhere': return json(res, 404, { cod: '404', message: 'city not found' })
      case 'Boom': return json(res, 500, { cod: 500 })
      case 'Busy': return json(res, 503, { cod: 503, message: 'Service temporarily unavailable' })
      case 'Garbage': res.writeHead(500, { 'content-type': 'text/html' }); return res.end('<h1>oops</h1>')
      case 'Moved': res.writeHead(302, { location: decoyUrl }); return res.end()
      case 'Leaky': return json(res, 401, { cod: 401, message: `Invalid API key ${url.searchParams.get('appid') ?? ''}` })
      case 'Echo': return json(res, 200, { name: city, echoed: url.href, [KEY]: KEY })
      case 'NotJson': res.writeHead(200, { 'content-type': 'text/html' }); return res.end('<h1>sunny</h1>')
      case 'Huge': return json(res, 200, { padding: 'x'.repeat(2 * 1024 * 1024) })
      case 'Hang': return undefined
      default: return json(res, 200, forecast(city))
    }
  })
}

/** Captured pino output, to prove the key never reaches a log line. */
function logSink (): { stream: Writable, text: () => string } {
  let text = ''
  const stream = new Writable({
    write (chunk: Buffer, _encoding, callback) {
      text += chunk.toString()
      callback()
    }
  })
  return { stream, text: () => text }
}

/** inject, recording every response so the whole suite can check that the key never left. */
function client (app: App, sent: string[]) {
  return async (url: string, headers: Record<string, string> = USER) => {
    const res = await app.inject({ method: 'GET', url, headers })
    sent.push(res.payload, JSON.stringify(res.headers))
    return { status: res.statusCode, body: res.json() as unknown }
  }
}

const q = (city: string): string => `/v2/weather?${new URLSearchParams({ city }).toString()}`

t.test('weather proxy with a key', async (t) => {
  const decoy = await listen(t, (_url, res) => json(res, 200, { decoy: true }))
  const upstream = await startUpstream(t, decoy.url)
  const logs = logSink()
  const sent: string[] = []
  const app = await build(t, {
    testAuth: true,
    logger: { level: 'trace', stream: logs.stream },
    config: { weatherApiKey: KEY, weatherApiUrl: upstream.url }
  })
  // The same router again, pointed at a closed port and with a short budget (so the hang test
  // need not wait the production 5 s); same error handler, same auth stub.
  const gone = await startUpstream(t)
  await gone.close()
  await app.register(async (scope) => {
    await scope.register(weatherRoutes, { prefix: '/gone', apiKey: KEY, url: gone.url })
    await scope.register(weatherRoutes, { prefix: '/fast', apiKey: KEY, url: upstream.url, timeoutMs: 300 })
  }, { prefix: '/extra' })
  await app.ready()
  const get = client(app, sent)

  t.test('returns the upstream JSON as-is and sends q, appid and units', async (t) => {
    t.same(await get(q('London')), { status: 200, body: forecast('London') })
    const asked = upstream.seen.at(-1)
    t.equal(asked?.pathname, PATH)
    t.same([...asked?.searchParams ?? []], [['q', 'London'], ['appid', KEY], ['units', 'metric']])
  })

  t.test('a city with URL syntax arrives intact as the value of q, at the same path', async (t) => {
    t.same(await get(q(ODD_CITY)), { status: 200, body: forecast(ODD_CITY) })
    const asked = upstream.seen.at(-1)
    t.equal(asked?.pathname, PATH)
    t.same([...asked?.searchParams ?? []], [['q', ODD_CITY], ['appid', KEY], ['units', 'metric']])
    t.equal(upstream.seen.length, 2)
  })

  t.test('the path variant', async (t) => {
    t.same(await get('/v2/weather/London'), { status: 200, body: forecast('London') })
    // The documented 200 characters, past the router's default limit of 100 on a parameter (414).
    const long = 'Llanfair'.repeat(25)
    t.same(await get(`/v2/weather/${long}`), { status: 200, body: forecast(long) }, 'a city of 200 characters')
    t.same(await get(`/v2/weather/${long}x`), { status: 400, body: { error: 'Validation failed', details: ['city must be at most 200 characters'] } },
      'one more is the route\'s own 400')
    const city = 'São Paulo/..?#&'
    t.same(await get(`/v2/weather/${encodeURIComponent(city)}`), { status: 200, body: forecast(city) })
    t.equal(upstream.seen.at(-1)?.pathname, PATH)
    t.equal(upstream.seen.at(-1)?.searchParams.get('q'), city)
    // CONTRACT 16: percent-encoding that is not UTF-8 reaches the route as U+FFFD, a stray % as itself.
    t.same(await get('/v2/weather/Z%FCrich'), { status: 200, body: forecast('Z\ufffdrich') }, 'Latin-1 bytes: U+FFFD')
    t.equal(upstream.seen.at(-1)?.searchParams.get('q'), 'Z\ufffdrich')
    t.same(await get('/v2/weather/100%'), { status: 200, body: forecast('100%') }, 'a stray %: the city holds it')
  })

  t.test('an upstream failure keeps its status and message', async (t) => {
    t.same(await get(q('Nowhere')), { status: 404, body: { error: 'city not found' } })
    t.same(await get('/v2/weather/Nowhere'), { status: 404, body: { error: 'city not found' } })
    t.same(await get(q('Boom')), { status: 500, body: { error: 'Weather API error' } })
    t.same(await get(q('Busy')), { status: 503, body: { error: 'Service temporarily unavailable' } })
    t.same(await get(q('Garbage')), { status: 500, body: { error: 'Weather API error' } })
  })

  t.test('a success answer that is not a JSON object, or is far too large, is 502', async (t) => {
    t.same(await get(q('NotJson')), { status: 502, body: { error: 'Weather API error' } })
    t.same(await get(q('Huge')), { status: 502, body: { error: 'Weather API error' } })
  })

  t.test('a redirect is mirrored, never followed', async (t) => {
    t.same(await get(q('Moved')), { status: 302, body: { error: 'Weather API error' } })
    t.equal(decoy.seen.length, 0)
  })

  t.test('an upstream that echoes the key does not leak it', async (t) => {
    t.same(await get(q('Leaky')), { status: 401, body: { error: 'Invalid API key [redacted]' } })
    t.same(await get(q('Echo')), {
      status: 200,
      body: { name: 'Echo', echoed: `http://upstream.invalid${PATH}?q=Echo&appid=[redacted]&units=metric`, '[redacted]': '[redacted]' }
    })
  })

  t.test('a missing, empty or blank city is 400', async (t) => {
    const before = upstream.seen.length
    const missing = { status: 400, body: { error: 'Missing required query parameter: city' } }
    t.same(await get('/v2/weather'), missing)
    t.same(await get('/v2/weather/'), missing)
    t.same(await get('/v2/weather?city='), missing)
    t.same(await get('/v2/weather?city=%20%20'), missing)
    t.same(await get('/v2/weather/%20'), missing)
    t.same(await get(q('x'.repeat(201))), { status: 400, body: { error: 'Validation failed', details: ['city must be at most 200 characters'] } })
    t.equal(upstream.seen.length, before)
  })

  t.test('no token is 401 and never reaches the upstream', async (t) => {
    const before = upstream.seen.length
    const unauthorized = { status: 401, body: { error: 'Invalid or missing token' } }
    t.same(await get(q('London'), {}), unauthorized)
    t.same(await get('/v2/weather/London', {}), unauthorized)
    t.equal(upstream.seen.length, before)
  })

  t.test('an upstream that cannot be reached is 502', async (t) => {
    const unreachable = { status: 502, body: { error: 'Failed to reach weather service' } }
    t.same(await get('/extra/gone?city=London'), unreachable)
    t.same(await get('/extra/gone/London'), unreachable)
  })

  t.test('an upstream that hangs is 502 once the timeout passes', async (t) => {
    const started = Date.now()
    t.same(await get('/extra/fast?city=Hang'), { status: 502, body: { error: 'Failed to reach weather service' } })
    const elapsed = Date.now() - started
    t.ok(elapsed >= 250 && elapsed < NOT_HUNG_MS, `gave up after ${elapsed} ms`)
    t.same(await get('/extra/fast/London'), { status: 200, body: forecast('London') })
  })

  t.test('the key never leaves the process', async (t) => {
    for (const text of sent) t.notMatch(text, KEY)
    t.match(logs.text(), '"msg":"request"')
    t.match(logs.text(), 'ECONNREFUSED')
    t.notMatch(logs.text(), KEY)
  })
})

t.test('without a key every route answers 500, before authentication', async (t) => {
  const upstream = await startUpstream(t)
  const sent: string[] = []
  const app = await build(t, { testAuth: true, config: { weatherApiKey: undefined, weatherApiUrl: upstream.url } })
  // A blank key counts as unset.
  await app.register(weatherRoutes, { prefix: '/blank', apiKey: '  ', url: upstream.url })
  const get = client(app, sent)
  const notConfigured = { status: 500, body: { error: 'WEATHER_API_KEY is not configured' } }
  for (const headers of [{}, USER]) {
    t.same(await get(q('London'), headers), notConfigured)
    t.same(await get('/v2/weather/London', headers), notConfigured)
    t.same(await get('/v2/weather', headers), notConfigured)
    t.same(await get('/blank?city=London', headers), notConfigured)
    t.same(await get('/blank/London', headers), notConfigured)
  }
  t.equal(upstream.seen.length, 0)
})

// Faults of the upstream through the app as configured (docs/operations.md, "Faults"): never a hung request,
// never a body held in memory whole.
t.test('weather upstream faults: slow, trickling, garbage and oversized answers', async (t) => {
  const CHUNK = Buffer.alloc(64 * 1024, 'x')
  const HUGE_BYTES = 50 * 1024 * 1024
  let hugeWritten = 0
  const timers = new Set<NodeJS.Timeout>()
  t.teardown(() => { for (const timer of timers) clearInterval(timer) })
  const upstream = await listen(t, (url, res) => {
    const city = url.searchParams.get('q') ?? ''
    switch (city) {
      case 'Silent': return undefined
      case 'Trickle': {
        // Headers at once, then one byte of a valid answer every 50 ms: no single gap is long.
        res.writeHead(200, { 'content-type': 'application/json' })
        const timer = setInterval(() => { if (!res.destroyed) res.write(' ') }, 50)
        timers.add(timer)
        res.on('close', () => clearInterval(timer))
        return undefined
      }
      case 'Huge': {
        // 50 MB streamed with backpressure, so only what the client reads is ever produced.
        res.writeHead(200, { 'content-type': 'application/json' })
        res.write('{"padding":"')
        const pump = (): void => {
          while (hugeWritten < HUGE_BYTES && !res.destroyed) {
            hugeWritten += CHUNK.length
            if (!res.write(CHUNK)) {
              res.once('drain', pump)
              return
            }
          }
          if (!res.destroyed) res.end('"}')
        }
        return pump()
      }
      case 'Declared': res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(HUGE_BYTES) }); return res.end()
      case 'Truncated': res.writeHead(200, { 'content-type': 'application/json' }); return res.end('{"name":"Trunc')
      case 'Array': return json(res, 200, [1, 2, 3])
      case 'Null': return json(res, 200, null)
      case 'Empty': res.writeHead(200); return res.end()
      case 'Binary': res.writeHead(200, { 'content-type': 'application/json' }); return res.end(Buffer.from([0xff, 0xfe, 0x00, 0x7b, 0x80]))
      case 'BusyHtml': res.writeHead(503, { 'content-type': 'text/html' }); return res.end('<h1>503</h1>')
      default: return json(res, 200, forecast(city))
    }
  })
  const app = await build(t, { testAuth: true, config: { weatherApiKey: KEY, weatherApiUrl: upstream.url } })
  await app.register(weatherRoutes, { prefix: '/fast', apiKey: KEY, url: upstream.url, timeoutMs: 300 })
  const get = client(app, [])
  const timed = async (url: string) => {
    const started = Date.now()
    const answer = await get(url)
    return { ...answer, ms: Date.now() - started }
  }
  const unreachable = { status: 502, body: { error: 'Failed to reach weather service' } }
  const garbage = { status: 502, body: { error: 'Weather API error' } }

  t.test('headers that never arrive: 502 once the 5 s budget is spent', async (t) => {
    const { ms, ...answer } = await timed(q('Silent'))
    t.same(answer, unreachable)
    t.ok(ms >= 4500 && ms < NOT_HUNG_MS, `answered after ${ms} ms`)
  })

  t.test('a body trickled byte by byte: 502 once the whole-request budget is spent, not per gap', async (t) => {
    const { ms, ...answer } = await timed('/fast?city=Trickle')
    t.same(answer, unreachable)
    t.ok(ms >= 250 && ms < NOT_HUNG_MS, `answered after ${ms} ms`)
  })

  t.test('garbage with a success status is 502; with an error status it is mirrored', async (t) => {
    for (const city of ['Truncated', 'Array', 'Null', 'Empty', 'Binary']) t.same(await get(q(city)), garbage, city)
    t.same(await get(q('BusyHtml')), { status: 503, body: { error: 'Weather API error' } })
  })

  t.test('a 50 MB body: 502 quickly, read no further than the cap, memory not grown by the body', async (t) => {
    const baseline = process.memoryUsage()
    let peak = { rss: baseline.rss, arrayBuffers: baseline.arrayBuffers }
    const sampler = setInterval(() => {
      const now = process.memoryUsage()
      peak = { rss: Math.max(peak.rss, now.rss), arrayBuffers: Math.max(peak.arrayBuffers, now.arrayBuffers) }
    }, 5)
    const { ms, ...answer } = await timed(q('Huge')).finally(() => clearInterval(sampler))
    t.same(answer, garbage)
    t.ok(ms < NOT_HUNG_MS, `answered after ${ms} ms`)
    t.ok(hugeWritten < 16 * 1024 * 1024, `the upstream could write only ${(hugeWritten / 1048576).toFixed(1)} MiB of 50 before the client stopped reading`)
    const grown = (peak.arrayBuffers - baseline.arrayBuffers) / 1048576
    t.ok(grown < 16, `buffers grew by at most ${grown.toFixed(1)} MiB`)
    const declared = await timed(q('Declared'))
    t.same({ status: declared.status, body: declared.body }, garbage, 'a declared 50 MB length is refused before any of it is read')
    t.ok(declared.ms < NOT_HUNG_MS, `answered after ${declared.ms} ms`)
    t.same(await get(q('London')), { status: 200, body: forecast('London') }, 'and the next request is served')
  })
})
