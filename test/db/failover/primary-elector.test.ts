import { createServer, connect, type AddressInfo, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import postgres from 'postgres'
import { PrimaryElector } from '../../../src/db/failover/elector.js'
import { within } from '../../../src/db/failover/probe.js'
import { PRIMARY_UNAVAILABLE_CODE } from '../../../src/errors.js'
import { startFailoverCluster } from '../../../scripts/postgres/failover-cluster.js'
import { postgresDatabase } from '../../helpers/database.js'
import { SlowLink } from '../../helpers/slow-link.js'

// The elector opens the primary pool's connections (src/db/failover/elector.ts). postgres.js 3.4.9
// defers a connection's startup message to a setImmediate, and a socket that closes before that
// write leaves the connection unable to write again (each later connect ends in CONNECT_TIMEOUT). So
// the elector hands the driver only connected sockets, and a host that died since its election,
// still named by it, gets the driver a socket that fails after that write, as a 503.

const SILENT = { warn: () => {}, error: () => {} }

t.test('a connection to a primary that just died fails as a 503 and leaves the pool usable', async (t) => {
  const cluster = await startFailoverCluster({ synchronous: false })
  t.teardown(() => cluster.stop())
  const url = cluster.serverUrl('a')
  // Probed by hand only: the periodic probe would make the test depend on its timing.
  const elector = new PrimaryElector(url, { probeEveryMs: 3_600_000, connectTimeoutMs: 3_000, log: SILENT })
  await elector.start()
  t.teardown(() => elector.close())
  // One connection, so the query after the restart runs on the same one as the query after the kill.
  let onClose = (): void => {}
  const sql = postgres(url, { max: 1, connect_timeout: 3, backoff: () => 0, onnotice: () => {}, onclose: () => { onClose() }, socket: elector.socket } as postgres.Options<Record<string, postgres.PostgresType>>)
  t.teardown(() => sql.end({ timeout: 0 }))
  t.same(await sql`select 1 as one`, [{ one: 1 }], 'the pool works on the elected primary')

  // The last election still names a when the next connection is asked for, from a timer: the
  // refusal of a closed port is delivered before the driver's deferred startup write.
  await elector.elect()
  // Once the driver has seen its connection close, the next query opens a new one (not CONNECTION_CLOSED on the old).
  const closed = new Promise<void>((resolve) => { onClose = resolve })
  cluster.kill('a')
  await closed
  const afterKill = await new Promise<{ code?: string }>((resolve) => {
    setTimeout(() => { sql`select 1 as one`.then(() => { resolve({}) }, resolve) }, 0)
  })
  t.equal(afterKill.code, PRIMARY_UNAVAILABLE_CODE, `the query after the kill fails as a 503 (${String(afterKill.code)})`)

  cluster.restart('a')
  let after: unknown
  // Bounded by time, not tries: a busy machine may take seconds to elect the restarted server.
  for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
    after = await sql`select 1 as one`.catch((err: { code?: string }) => err.code)
    // A poisoned slot answers CONNECT_TIMEOUT, each time; anything else is the restart still settling.
    if (Array.isArray(after) || after === 'CONNECT_TIMEOUT') break
    await sleep(100)
  }
  t.same(after, [{ one: 1 }], 'once the primary is back, the same connection reaches it (not CONNECT_TIMEOUT)')
})

t.test('a probe answered while the event loop was blocked past its timeout gets the answer, not a timeout', async (t) => {
  // A loopback connection: the server's write reaches the client's socket at once, in the kernel.
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close() })
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve))
  const client = connect((server.address() as AddressInfo).port, '127.0.0.1')
  t.teardown(() => { client.destroy() })
  const peer = await accepted
  const answer = new Promise<string>((resolve) => client.once('data', (data) => { resolve(data.toString()) }))

  const read = within(answer, 200)
  // The answer arrives while the loop is blocked past the timeout: the next iteration finds both
  // ready, its timers first. (Blocked from setImmediate: a block inside a timer's callback would
  // leave the loop's clock behind, and its timers for the iteration after.)
  await new Promise<void>((resolve) => {
    setImmediate(() => {
      peer.write('state')
      const until = performance.now() + 500
      while (performance.now() < until) { /* an event loop blocked, as by a long synchronous task */ }
      resolve()
    })
  })
  t.equal(await read, 'state', 'the answer that arrived during the block')
})

t.test('a question written only after the event loop was blocked past the timeout still gets its answer', async (t) => {
  // A loopback server that answers each question at once.
  const server = createServer((peer) => { peer.on('data', () => { peer.write('state') }) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close() })
  const client = connect((server.address() as AddressInfo).port, '127.0.0.1')
  t.teardown(() => { client.destroy() })
  await new Promise<void>((resolve) => client.once('connect', resolve))
  const answer = new Promise<string>((resolve) => client.once('data', (data) => { resolve(data.toString()) }))

  const read = within(answer, 300)
  // As postgres.js does, the question is written from a setImmediate, and the loop is blocked before
  // that can run: once it turns again, the write and the timeout's decision would come in one check
  // phase, with no look at the socket between them, had the blocked time counted.
  await new Promise<void>((resolve) => {
    setImmediate(() => {
      setImmediate(() => { client.write('question') })
      const until = performance.now() + 500
      while (performance.now() < until) { /* an event loop blocked, as by a long synchronous task */ }
      resolve()
    })
  })
  t.equal(await read, 'state', 'the answer to the question written after the block')
})

t.test('a server that never answers still times out after the given time', async (t) => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close() })
  const client = connect((server.address() as AddressInfo).port, '127.0.0.1')
  t.teardown(() => { client.destroy() })
  const started = performance.now()
  await t.rejects(within(new Promise<string>((resolve) => client.once('data', (data) => { resolve(data.toString()) })), 300), { message: 'probe timed out' })
  t.ok(performance.now() - started >= 300, 'not before the time given')
})

t.test('a primary that answers nothing for a while, then answers again unchanged, keeps its connections', async (t) => {
  // Every byte from the server passes through a proxy that can stop passing them on: the probe's
  // answers and the pool's alike, as in a network stall. The server itself never stops.
  const server = new URL(await postgresDatabase(t))
  const link = await SlowLink.open(t, `http://${server.hostname}:${server.port}`, Infinity)
  const url = new URL(server)
  url.host = new URL(link.url).host
  const logged: string[] = []
  const log = { warn: (_fields: object, msg: string) => { logged.push(`warn: ${msg}`) }, error: (_fields: object, msg: string) => { logged.push(`error: ${msg}`) } }
  // Elections by hand only, so the test does not depend on the periodic probe's timing.
  const elector = new PrimaryElector(url.toString(), { probeEveryMs: 3_600_000, connectTimeoutMs: 3_000, log })
  await elector.start()
  t.teardown(() => elector.close())
  const sql = postgres(url.toString(), { max: 1, onnotice: () => {}, socket: elector.socket } as postgres.Options<Record<string, postgres.PostgresType>>)
  t.teardown(() => sql.end({ timeout: 0 }))
  const [before] = await sql<Array<{ pid: number }>>`select pg_backend_pid() as pid`

  link.stop()
  t.equal(await elector.elect(), undefined, 'no answer within the probe\'s time: no writable primary')
  link.resume()
  t.ok(await elector.elect(), 'the same primary once it answers again')
  const [after] = await sql<Array<{ pid: number }>>`select pg_backend_pid() as pid`
  t.equal(after?.pid, before?.pid, 'the connection opened before the stall still serves the pool')
  t.same(logged, ['error: no writable database primary: writes answer 503 until one is promoted', 'warn: the database primary answers again'])
})
