// The process writes its JSON lines without blocking (src/logging/log-stream.ts): a line still reaches
// stdout as soon as it is logged when nothing else happens, and none is lost when the process ends,
// whether it drains on SIGTERM or calls process.exit at once.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { Agent, request } from 'undici'
import { LOADER_ARGS, LOADER_ENV, processDatabase, startServer } from '../helpers/server-process.js'
import { startTestIdp } from '../helpers/idp.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const AUDIENCE = 'messages-api-test'
const BURST = 300

interface Line { msg?: string, reqId?: string, route?: string, statusCode?: number, level?: number }

const parsed = (lines: string[]): Line[] => lines.map((line) => JSON.parse(line) as Line)

async function until (check: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) return false
    await sleep(10)
  }
  return true
}

t.test('a request line is written at once, every line of a burst is there after SIGTERM', async (t) => {
  const idp = await startTestIdp(t, { audience: AUDIENCE })
  const db = await processDatabase(t)
  const server = await startServer(t, { ...db.env, AUTH_ISSUER: idp.url, API_AUDIENCE: AUDIENCE, MAX_EVENT_LOOP_DELAY_MS: '0' }, db.cwd)

  // One request and then silence: its line must not wait for more lines to fill a buffer.
  const single = await request(`${server.url}/health`, { headers: { 'x-request-id': 'alone-1' } })
  t.equal(single.statusCode, 200)
  await single.body.dump()
  const written = await until(() => parsed(server.lines).some((line) => line.reqId === 'alone-1' && line.msg === 'request'), 2000)
  t.ok(written, 'the line of a lone request reached stdout within 2 s')

  // A burst on 20 connections, then SIGTERM as soon as the last answer arrives: lines buffered
  // while a write was in flight are flushed before the process exits.
  const agent = new Agent({ connections: 20 })
  t.teardown(async () => { await agent.close() })
  const statuses = await Promise.all(Array.from({ length: BURST }, async (_, i) => {
    const response = await request(`${server.url}/health`, { dispatcher: agent, headers: { 'x-request-id': `burst-${i}` } })
    await response.body.dump()
    return response.statusCode
  }))
  t.same(new Set(statuses), new Set([200]), 'every request of the burst answered 200')
  server.child.kill('SIGTERM')
  const { code } = await server.exited
  t.equal(code, 0, 'exit 0 after draining')
  // stdout is read until it closes, after the exit event.
  await until(() => server.child.stdout?.readableEnded === true, 2000)

  const lines = parsed(server.lines)
  const logged = new Set(lines.filter((line) => line.msg === 'request' && line.route === '/health' && line.statusCode === 200).map((line) => line.reqId))
  const missing = Array.from({ length: BURST }, (_, i) => `burst-${i}`).filter((id) => !logged.has(id))
  t.same(missing, [], `all ${BURST} request lines are in stdout`)
  t.equal(lines.filter((line) => line.msg === 'closing').length, 1, 'the shutdown line too')
})

// What a crash does: many lines logged in one tick, then process.exit(1) before any write completed.
const EXITING = `
import pino from 'pino'
import { stdoutLines } from './src/logging/log-stream.ts'
const log = pino({}, stdoutLines())
for (let i = 0; i < 5000; i++) log.info({ n: i }, 'line')
log.fatal('exiting')
process.exit(1)
`

t.test('lines logged just before process.exit are all written', async (t) => {
  const child = spawn(process.execPath, [...LOADER_ARGS, '--input-type=module', '-e', EXITING], { cwd: ROOT, env: { ...LOADER_ENV, PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  t.equal(code, 1, stderr)
  const lines = stdout.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as { n?: number, msg: string })
  t.equal(lines.length, 5001, 'every line, the fatal one included')
  t.same(lines.slice(0, 5000).map((line) => line.n), Array.from({ length: 5000 }, (_, i) => i), 'in order')
  t.equal(lines.at(-1)?.msg, 'exiting')
})
