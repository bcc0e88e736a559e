import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

// The README's promise, checked as a new user would meet it: clone the committed HEAD into a temp
// folder, `npm ci`, `npm start` with none of the project's variables set, then the walk-through's
// first steps over HTTP. Too slow for `npm test`; .ci/run runs it.

const API_PORT = 3001
const IDP_PORT = 3002
const API = `http://127.0.0.1:${API_PORT}`
const LIMIT_MS = 10 * 60_000
const STEP_MS = { clone: 60_000, install: 8 * 60_000, start: 2 * 60_000, token: 60_000, request: 10_000, stop: 15_000 }
const EMAIL = 'alice@example.com'

// Only what any shell has (and what npm needs to reach its registry): no PORT, DATABASE_URL,
// AUTH_ISSUER or any other project variable, and none of the npm_* variables `npm run` adds.
const KEPT_ENV = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TERM', 'TMPDIR', 'TZ',
  'NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR', 'http_proxy', 'https_proxy', 'no_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY']

class CheckError extends Error {}

const say = (line: string): boolean => process.stdout.write(`fresh-clone: ${line}\n`)

function cleanEnv (): NodeJS.ProcessEnv {
  return Object.fromEntries(KEPT_ENV.flatMap((key) => process.env[key] === undefined ? [] : [[key, process.env[key]]]))
}

// Each child leads its own process group, so a timeout or the final stop reaches its whole tree.
function killGroup (child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return
  try { process.kill(-child.pid, signal) } catch { /* already gone */ }
}

function groupAlive (pid: number): boolean {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

function tail (text: string, lines = 40): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n')
}

interface Run { code: number | null, stdout: string, output: string }

async function run (label: string, command: string, args: string[], options: { cwd?: string, env?: NodeJS.ProcessEnv, timeoutMs: number, signal: AbortSignal }): Promise<Run> {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? cleanEnv(), detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); output += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const stop = AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutMs)])
  const onAbort = (): void => killGroup(child, 'SIGKILL')
  stop.addEventListener('abort', onAbort, { once: true })
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', resolve)
  }).finally(() => stop.removeEventListener('abort', onAbort))
  if (options.signal.aborted) throw new CheckError(`${label} was stopped`)
  if (stop.aborted) throw new CheckError(`${label} did not finish within ${options.timeoutMs / 1000} s\n${tail(output)}`)
  if (code !== 0) throw new CheckError(`${label} exited with ${code}\n${tail(output)}`)
  return { code, stdout, output }
}

async function portFree (port: number): Promise<boolean> {
  const server = createServer()
  return await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false))
    // No host: the wildcard address of both families, which clashes with any listener on the port.
    server.listen({ port }, () => server.close(() => resolve(true)))
  })
}

async function requirePortsFree (when: string): Promise<void> {
  for (const [port, what] of [[API_PORT, 'the API'], [IDP_PORT, 'the local identity provider']] as const) {
    if (!await portFree(port)) {
      throw new CheckError(`port ${port} is in use ${when}; \`npm start\` needs it for ${what}. Stop whatever listens there (ss -ltnp 'sport = :${port}') and run again`)
    }
  }
}

async function git (args: string[], signal: AbortSignal, cwd?: string): Promise<string> {
  return (await run(`git ${args[0] ?? ''}`, 'git', args, { cwd, env: process.env, timeoutMs: STEP_MS.clone, signal })).stdout.trim()
}

async function get (path: string, headers: Record<string, string> = {}): Promise<Response> {
  try {
    return await fetch(`${API}${path}`, { headers, signal: AbortSignal.timeout(STEP_MS.request) })
  } catch (err) {
    throw new CheckError(`GET ${path} failed: ${(err as Error).message}`)
  }
}

async function expectJson (path: string, headers: Record<string, string>, expected: unknown): Promise<void> {
  const res = await get(path, headers)
  const body = await res.text()
  if (res.status !== 200 || body !== JSON.stringify(expected)) {
    throw new CheckError(`GET ${path}: expected 200 ${JSON.stringify(expected)}, got ${res.status} ${body}`)
  }
  say(`GET ${path} → 200 ${body}`)
}

async function expectDocs (): Promise<void> {
  const page = await get('/api-docs')
  const html = await page.text()
  if (page.status !== 200 || !(page.headers.get('content-type') ?? '').startsWith('text/html') || !html.includes('swagger-ui')) {
    throw new CheckError(`GET /api-docs: expected 200 with Swagger UI's HTML, got ${page.status} ${page.headers.get('content-type') ?? ''}`)
  }
  say('GET /api-docs → 200 text/html (Swagger UI)')
  const res = await get('/api-docs/json')
  const document = await res.json().catch(() => undefined) as { openapi?: unknown, paths?: Record<string, unknown> } | undefined
  if (res.status !== 200 || typeof document?.openapi !== 'string' || !document.openapi.startsWith('3.') || document.paths?.['/v2/hello'] === undefined) {
    throw new CheckError(`GET /api-docs/json: expected 200 with an OpenAPI 3 document describing /v2/hello, got ${res.status}`)
  }
  say(`GET /api-docs/json → 200 OpenAPI ${document.openapi}, ${Object.keys(document.paths).length} paths`)
}

interface Server { child: ChildProcess, output: () => string }

function startServer (cwd: string): Server {
  const child = spawn('npm', ['start'], { cwd, env: cleanEnv(), detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => { output += chunk.toString() })
  child.stderr?.on('data', (chunk: Buffer) => { output += chunk.toString() })
  return { child, output: () => output }
}

async function waitUntilHealthy (server: Server, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + STEP_MS.start
  while (Date.now() < deadline && !signal.aborted) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      throw new CheckError(`npm start exited (${server.child.exitCode ?? server.child.signalCode}) before answering /health\n${tail(server.output())}`)
    }
    const res = await fetch(`${API}/health`, { signal: AbortSignal.timeout(2_000) }).catch(() => undefined)
    if (res !== undefined) {
      await res.body?.cancel()
      return
    }
    await sleep(500)
  }
  if (signal.aborted) throw new CheckError('waiting for npm start was stopped')
  throw new CheckError(`npm start did not answer on ${API} within ${STEP_MS.start / 1000} s\n${tail(server.output())}`)
}

/** SIGTERM to the whole tree (npm, the shell, node); the check fails if any of it outlives the grace period. */
async function stopServer (server: Server): Promise<void> {
  const pid = server.child.pid
  if (pid === undefined) return
  killGroup(server.child, 'SIGTERM')
  const deadline = Date.now() + STEP_MS.stop
  while (groupAlive(pid) && Date.now() < deadline) await sleep(200)
  if (groupAlive(pid)) {
    killGroup(server.child, 'SIGKILL')
    throw new CheckError(`npm start was still running ${STEP_MS.stop / 1000} s after SIGTERM (killed)\n${tail(server.output())}`)
  }
  say('server stopped by SIGTERM; no process of its tree is left')
}

async function check (signal: AbortSignal, workdir: string): Promise<void> {
  await requirePortsFree('before the check')
  const source = await git(['rev-parse', '--show-toplevel'], signal)
  const commit = await git(['rev-parse', 'HEAD'], signal, source)
  const clone = join(workdir, 'messages-api')
  say(`cloning ${source} at ${commit.slice(0, 12)} into ${clone}`)
  await git(['clone', '--quiet', '--no-checkout', source, clone], signal)
  await git(['checkout', '--quiet', '--detach', commit], signal, clone)

  say('npm ci')
  const started = Date.now()
  await run('npm ci', 'npm', ['ci', '--no-audit', '--no-fund'], { cwd: clone, timeoutMs: STEP_MS.install, signal })
  say(`npm ci done in ${Math.round((Date.now() - started) / 1000)} s`)

  say('npm start (no project variables set)')
  const server = startServer(clone)
  try {
    await waitUntilHealthy(server, signal)
    await expectJson('/health', {}, { ok: true })
    const token = (await run('npm run token', 'npm', ['run', '-s', 'token', '--', '--sub', 'alice', '--role', 'Admin', '--email', EMAIL],
      { cwd: clone, timeoutMs: STEP_MS.token, signal })).stdout.trim()
    if (!/^[\w-]+\.[\w-]+\.[\w-]+$/.test(token)) throw new CheckError(`npm run token printed no token: ${JSON.stringify(token.slice(0, 200))}`)
    say('npm run -s token -- --sub alice --role Admin … → a token')
    await expectJson('/v2/hello', { authorization: `Bearer ${token}` }, { message: `Hello, ${EMAIL}!`, role: 'Admin' })
    await expectDocs()
  } finally {
    await stopServer(server)
  }
  await requirePortsFree('after the server stopped')
}

async function main (): Promise<number> {
  const controller = new AbortController()
  const limit = setTimeout(() => controller.abort(`the check took longer than its ${LIMIT_MS / 1000} s limit`), LIMIT_MS)
  const interrupt = (signal: NodeJS.Signals): void => controller.abort(`interrupted by ${signal}`)
  process.once('SIGINT', interrupt)
  process.once('SIGTERM', interrupt)
  const workdir = await mkdtemp(join(tmpdir(), 'fresh-clone-'))
  const started = Date.now()
  try {
    await check(controller.signal, workdir)
    say(`passed in ${Math.round((Date.now() - started) / 1000)} s`)
    return 0
  } catch (err) {
    const reason = controller.signal.aborted ? `${String(controller.signal.reason)}, after ${Math.round((Date.now() - started) / 1000)} s: ` : ''
    process.stderr.write(`fresh-clone: FAILED: ${reason}${err instanceof CheckError ? err.message : (err as Error).stack ?? String(err)}\n`)
    return 1
  } finally {
    clearTimeout(limit)
    await rm(workdir, { recursive: true, force: true, maxRetries: 3 })
  }
}

process.exitCode = await main()
