// Slow clients (docs/operations.md, "Slow clients"): a client that trickles its headers or its body is cut off by
// the server's own timeouts instead of holding a connection open for as long as it likes.
import { readFile } from 'node:fs/promises'
import { connect } from 'node:net'
import t, { type Test } from 'tap'
import {
  buildApp, CONNECTION_TIMEOUT_MS, HEADERS_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS, REQUEST_TIMEOUT_MS, SERVER_TIMEOUTS,
  TIMEOUT_CHECK_INTERVAL_MS, type ServerTimeouts
} from '../../src/app.js'
import { build, testConfig } from '../helpers/build.js'
import { freshDatabase } from '../helpers/database.js'

// Small limits so the test takes seconds; the production values are asserted separately below.
const FAST: ServerTimeouts = {
  headersTimeoutMs: 1_000,
  requestTimeoutMs: 2_000,
  keepAliveTimeoutMs: 500,
  connectionTimeoutMs: 5_000,
  checkIntervalMs: 200
}
// Node's own behaviour when nothing is configured: no request timeout, headers within 60 s.
const UNLIMITED: ServerTimeouts = {
  headersTimeoutMs: 60_000,
  requestTimeoutMs: 0,
  keepAliveTimeoutMs: 5_000,
  connectionTimeoutMs: 0,
  checkIntervalMs: 200
}
const BYTE_EVERY_MS = 100
// How long a trickling client is watched: well past every FAST limit plus one check interval.
const WATCH_MS = 4_000

async function listening (t: Test, timeouts: ServerTimeouts): Promise<{ host: string, port: number }> {
  const database = await freshDatabase()
  const app = await buildApp(testConfig({ databaseUrl: database.dataDir === undefined ? database.url : undefined }), { logger: false, timeouts, dataDir: database.dataDir })
  t.teardown(async () => {
    await app.close()
    await database.drop()
  })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('not listening on a port')
  return { host: '127.0.0.1', port: address.port }
}

interface Trickle {
  /** Whether the server closed the connection while the client was still sending. */
  cutOff: boolean
  /** Milliseconds from the first byte to the close (or to the end of the watch). */
  elapsedMs: number
  /** Bytes the client managed to send of the whole request. */
  sent: number
  total: number
  /** Whatever the server answered before closing. */
  response: string
}

/**
 * Sends `head` at once, then `slow` one byte every BYTE_EVERY_MS, and watches for WATCH_MS whether
 * the server closes the connection first.
 */
async function trickle (server: { host: string, port: number }, head: string, slow: string): Promise<Trickle> {
  const socket = connect(server.port, server.host)
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  const started = Date.now()
  let response = ''
  let sent = 0
  let closed = false
  socket.on('data', (chunk: Buffer) => { response += chunk.toString('latin1') })
  // A write racing the server's close can fail with EPIPE or ECONNRESET; being cut off is the point.
  socket.on('error', () => {})
  const closedAt = new Promise<number>((resolve) => socket.once('close', () => {
    closed = true
    resolve(Date.now())
  }))
  if (head !== '') {
    socket.write(head)
    sent += Buffer.byteLength(head)
  }
  const bytes = Buffer.from(slow)
  const timer = setInterval(() => {
    if (closed || sent - Buffer.byteLength(head) >= bytes.length) return
    const index = sent - Buffer.byteLength(head)
    socket.write(bytes.subarray(index, index + 1))
    sent++
  }, BYTE_EVERY_MS)
  const watchEnd = new Promise<number>((resolve) => setTimeout(() => resolve(Date.now()), WATCH_MS))
  const end = await Promise.race([closedAt, watchEnd])
  clearInterval(timer)
  const cutOff = closed
  socket.destroy()
  return { cutOff, elapsedMs: end - started, sent, total: Buffer.byteLength(head) + bytes.length, response }
}

// A request whose headers alone take far longer than any limit to arrive at one byte per tick.
const SLOW_HEADERS = `GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ${'a'.repeat(200)}\r\n\r\n`
// A JSON body of 500 bytes announced up front, then sent one byte per tick.
const BODY = JSON.stringify({ name: 'Slow', email: 'slow@example.com', padding: 'b'.repeat(440) })
const BODY_HEAD = `POST /v2/input/users HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(BODY)}\r\n\r\n`

t.test('production timeouts: what docs/operations.md documents, and compatible with a load balancer', async (t) => {
  const app = await build(t)
  t.same(SERVER_TIMEOUTS, {
    keepAliveTimeoutMs: 72_000,
    requestTimeoutMs: 15_000,
    headersTimeoutMs: 10_000,
    connectionTimeoutMs: 75_000,
    checkIntervalMs: 1_000
  })
  t.same(
    [app.server.keepAliveTimeout, app.server.requestTimeout, app.server.headersTimeout, app.server.timeout],
    [KEEP_ALIVE_TIMEOUT_MS, REQUEST_TIMEOUT_MS, HEADERS_TIMEOUT_MS, CONNECTION_TIMEOUT_MS],
    'the server built without overrides uses them')
  // A balancer reusing an idle connection must never meet one the server is closing: the server
  // keeps idle connections longer than the common 60 s idle timeout of balancers.
  t.ok(KEEP_ALIVE_TIMEOUT_MS > 60_000, 'keepAliveTimeout is above 60 s')
  t.ok(HEADERS_TIMEOUT_MS < REQUEST_TIMEOUT_MS, 'headers are due before the whole request')
  t.ok(KEEP_ALIVE_TIMEOUT_MS < CONNECTION_TIMEOUT_MS, 'an idle keep-alive connection ends by keepAliveTimeout, not by the socket timeout')
  t.ok(TIMEOUT_CHECK_INTERVAL_MS <= 1_000, 'limits are checked at least every second')

  const operations = await readFile(new URL('../../docs/operations.md', import.meta.url), 'utf8')
  const seconds = (ms: number): string => `${ms / 1000} s`
  t.match(operations, `\`keepAliveTimeout\` is ${seconds(KEEP_ALIVE_TIMEOUT_MS)}`, 'docs/operations.md: keepAliveTimeout')
  t.match(operations, `Headers must arrive within ${seconds(HEADERS_TIMEOUT_MS)}`, 'docs/operations.md: headers timeout')
  t.match(operations, `a whole request within ${seconds(REQUEST_TIMEOUT_MS)}`, 'docs/operations.md: requestTimeout')
  t.match(operations, `silent for\n${seconds(CONNECTION_TIMEOUT_MS)} (\`connectionTimeout\`)`, 'docs/operations.md: connectionTimeout')
})

/** Cut off by `limit` (not before it, within one check interval after it), with a 408 in the one error shape. */
function assertTimedOut (t: Test, result: { elapsedMs: number, response: string }, limitMs: number, limit: string): void {
  t.ok(result.elapsedMs >= limitMs - 50, `not before ${limit}`)
  t.ok(result.elapsedMs <= limitMs + 2 * FAST.checkIntervalMs + 500, 'within one check interval of it')
  t.match(result.response, /^HTTP\/1\.1 408 Request Timeout\r\n/, 'answered 408 before closing')
  t.same(JSON.parse(result.response.split('\r\n\r\n')[1] ?? ''), { error: 'Request Timeout' }, 'in the one error shape')
}

// One server with the small limits serves every test that expects a cut-off.
const fast = await listening(t, FAST)

t.test('a client sending its headers byte by byte is cut off by the headers timeout', async (t) => {
  const result = await trickle(fast, '', SLOW_HEADERS)
  t.ok(result.cutOff, `the server closed the connection (after ${result.elapsedMs} ms)`)
  t.ok(result.sent < result.total, `before the client finished its headers (${result.sent} of ${result.total} bytes)`)
  assertTimedOut(t, result, FAST.headersTimeoutMs, 'the headers timeout')
})

t.test('a client sending its body byte by byte is cut off by requestTimeout', async (t) => {
  const result = await trickle(fast, BODY_HEAD, BODY)
  t.ok(result.cutOff, `the server closed the connection (after ${result.elapsedMs} ms)`)
  t.ok(result.sent < result.total, `before the client finished its body (${result.sent} of ${result.total} bytes)`)
  // The headers were complete at once, so only the whole-request limit can have ended it.
  assertTimedOut(t, result, FAST.requestTimeoutMs, 'requestTimeout')
})

t.test('a client that connects and sends nothing is cut off by the headers timeout', async (t) => {
  const result = await trickle(fast, '', '')
  t.ok(result.cutOff, `the server closed the connection (after ${result.elapsedMs} ms)`)
  t.ok(result.elapsedMs <= FAST.headersTimeoutMs + 2 * FAST.checkIntervalMs + 500, 'within one check interval of the headers timeout')
})

t.test('an idle keep-alive connection is closed after keepAliveTimeout', async (t) => {
  const result = await trickle(fast, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', '')
  t.match(result.response, /^HTTP\/1\.1 200 OK\r\n/, 'the request was answered')
  t.match(result.response, /keep-alive/i, 'on a keep-alive connection')
  t.ok(result.cutOff, `then the server closed it (after ${result.elapsedMs} ms)`)
  t.ok(result.elapsedMs >= FAST.keepAliveTimeoutMs - 50, 'not before keepAliveTimeout')
  // Node closes an idle keep-alive socket up to 1 s after keepAliveTimeout (its own safety margin).
  t.ok(result.elapsedMs <= FAST.keepAliveTimeoutMs + 1_000 + 500, 'soon after it')
})

// The control: the same clients against a server without these limits are not cut off, so the
// tests above fail if the timeouts are not set.
t.test('without the timeouts, the same slow clients keep their connections', async (t) => {
  const server = await listening(t, UNLIMITED)
  const [headers, body] = await Promise.all([trickle(server, '', SLOW_HEADERS), trickle(server, BODY_HEAD, BODY)])
  t.notOk(headers.cutOff, `headers trickle still connected after ${headers.elapsedMs} ms`)
  t.notOk(body.cutOff, `body trickle still connected after ${body.elapsedMs} ms`)
})
