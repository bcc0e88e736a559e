// CONTRACT 16: a heavy read whose client has gone is given up. A request's asker reads its signal only
// when a heavy read starts, which may be after the client has gone: the signal is aborted then too.
import Fastify from 'fastify'
import { once } from 'node:events'
import { request as httpRequest } from 'node:http'
import t from 'tap'
import { askerOf } from '../../src/http/asker.js'
import type { Asker } from '../../src/db/heavy-reads.js'

/** A server whose one route hands its request's asker to `seen` and answers once `release` resolves. */
async function serverWith (seen: (asker: Asker, closed: Promise<unknown>) => Promise<void>) {
  const app = Fastify({ trustProxy: '127.0.0.1' })
  app.get('/', async (request) => {
    await seen(askerOf(request), once(request.raw.socket, 'close'))
    return { ok: true }
  })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return { app, port: address.port }
}

function deferred () {
  let settle = (): void => {}
  const promise = new Promise<void>((resolve) => { settle = resolve })
  return { promise, resolve: () => { settle() } }
}

function get (port: number, headers: Record<string, string> = {}) {
  const req = httpRequest({ host: '127.0.0.1', port, path: '/', headers })
  req.on('error', () => {})
  req.end()
  return req
}

t.test('a signal first read after the client has gone is aborted', async (t) => {
  let aborted: boolean | undefined
  const done = deferred()
  const { app, port } = await serverWith(async (asker, closed) => {
    req.destroy()
    await closed
    aborted = asker.signal?.aborted
    done.resolve()
  })
  t.teardown(async () => { await app.close() })
  const req = get(port)
  await done.promise
  t.equal(aborted, true)
})

t.test('a signal read while the client waits aborts when it goes, and the address is the client\'s as TRUST_PROXY resolves it', async (t) => {
  const seen: { address?: string, before?: boolean, after?: boolean } = {}
  const done = deferred()
  const { app, port } = await serverWith(async (asker, closed) => {
    seen.address = asker.address
    const signal = asker.signal
    seen.before = signal?.aborted
    const gone = signal === undefined ? Promise.resolve() : once(signal, 'abort')
    req.destroy()
    await closed
    await gone
    seen.after = signal?.aborted
    done.resolve()
  })
  t.teardown(async () => { await app.close() })
  const req = get(port, { 'x-forwarded-for': '203.0.113.7' })
  await done.promise
  t.same(seen, { address: '203.0.113.7', before: false, after: true })
})
