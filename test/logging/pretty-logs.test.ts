// Readable logs on a terminal: which format loggerOptions picks, and a real pino-pretty logger in a
// child process that prints lines a person reads and never a token.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { loggerOptions } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { LOADER_ARGS, LOADER_ENV } from '../helpers/server-process.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const ISSUER = 'https://idp.example.com'
const REDACT = { paths: ['req.headers.authorization', 'req.headers["x-test-user"]', 'req.headers.cookie'], censor: '[redacted]' }
const PRETTY = { target: 'pino-pretty', options: { colorize: false, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } }

/** 'pretty' when the options send the lines through pino-pretty, else 'json'. */
function format (env: Record<string, string>, isTTY: boolean, prettyInstalled = true): string {
  const options = loggerOptions(loadConfig(env), isTTY, prettyInstalled) as Record<string, unknown>
  return Object.hasOwn(options, 'transport') ? 'pretty' : 'json'
}

t.test('LOG_FORMAT wins; otherwise pretty only on a terminal outside production', async (t) => {
  const cases: Array<[string, Record<string, string>, boolean, boolean, string]> = [
    ['a terminal, NODE_ENV unset (npm start)', {}, true, true, 'pretty'],
    ['a terminal, NODE_ENV=development', { NODE_ENV: 'development' }, true, true, 'pretty'],
    ['a terminal, NODE_ENV=test', { NODE_ENV: 'test' }, true, true, 'pretty'],
    ['a terminal, NODE_ENV=production', { NODE_ENV: 'production', AUTH_ISSUER: ISSUER }, true, true, 'json'],
    ['a pipe or a file', {}, false, true, 'json'],
    ['a pipe in production', { NODE_ENV: 'production', AUTH_ISSUER: ISSUER }, false, true, 'json'],
    ['a terminal where pino-pretty is not installed (npm ci --omit=dev)', {}, true, false, 'json'],
    ['LOG_FORMAT=json on a terminal', { LOG_FORMAT: 'json' }, true, true, 'json'],
    ['LOG_FORMAT=pretty in a pipe', { LOG_FORMAT: 'pretty' }, false, true, 'pretty'],
    ['LOG_FORMAT=pretty in production', { LOG_FORMAT: 'pretty', NODE_ENV: 'production', AUTH_ISSUER: ISSUER }, true, true, 'pretty']
  ]
  for (const [name, env, isTTY, installed, expected] of cases) t.equal(format(env, isTTY, installed), expected, `${name}: ${expected}`)
})

t.test('both formats keep the level and the redaction; colours only on a terminal', async (t) => {
  const config = loadConfig({ LOG_LEVEL: 'debug' })
  t.same(loggerOptions(config, false, true), { level: 'debug', redact: REDACT }, 'JSON lines')
  t.same(loggerOptions(config, true, true), { level: 'debug', redact: REDACT, transport: { ...PRETTY, options: { ...PRETTY.options, colorize: true } } },
    'pretty and coloured on a terminal')
  t.same(loggerOptions(loadConfig({ LOG_LEVEL: 'debug', LOG_FORMAT: 'pretty' }), false, true), { level: 'debug', redact: REDACT, transport: PRETTY },
    'pretty without colour codes when forced into a pipe')
})

const TOKEN = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJsb2ctdXNlciJ9.c2lnbmF0dXJlLW5ldmVyLWxvZ2dlZA'
const TEST_USER = '{"sub":"secret-test-user"}'
const COOKIE = 'sid=secret-cookie'

// pino on its own keeps req.headers as given, so the redaction paths are what stands between the
// token and the output; Fastify's logger shows that the options start a real server's logging.
const SCRIPT = `
import Fastify from 'fastify'
import pino from 'pino'
import { loggerOptions } from './src/app.ts'
import { loadConfig } from './src/config.ts'
const format = process.argv[1]
const options = loggerOptions(loadConfig(format === '' ? {} : { LOG_FORMAT: format }))
const headers = { authorization: 'Bearer ${TOKEN}', 'x-test-user': ${JSON.stringify(TEST_USER)}, cookie: '${COOKIE}' }
pino(options).info({ req: { method: 'GET', url: '/v2/hello', headers } }, 'with headers')
const app = Fastify({ logger: options })
app.get('/hello', async () => ({ ok: true }))
await app.inject({ url: '/hello', headers })
await app.close()
`

async function run (format: string): Promise<{ code: number | null, stdout: string, stderr: string }> {
  return await new Promise((resolve, reject) => {
    // The environment is built, not inherited: LOG_FORMAT travels as an argument. The child loads
    // TypeScript with the runner's own loader (as test/helpers/server-process.ts does): the runner
    // follows children for coverage, and code compiled another way would not merge with the tests'.
    const child = spawn(process.execPath, [...LOADER_ARGS, '--input-type=module', '-e', SCRIPT, format],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...LOADER_ENV }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
    const timer = setTimeout(() => { child.kill('SIGKILL') }, 120_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

function isJson (line: string): boolean {
  try {
    return typeof JSON.parse(line) === 'object'
  } catch {
    return false
  }
}

const SECRETS = [TOKEN, TOKEN.split('.')[2] ?? TOKEN, 'secret-test-user', 'secret-cookie']

t.test('a child process with LOG_FORMAT=pretty prints readable lines and no token', async (t) => {
  const { code, stdout, stderr } = await run('pretty')
  t.equal(code, 0, `exit 0 (${stderr})`)
  const lines = stdout.split('\n').filter((line) => line.trim() !== '')
  t.ok(lines.length > 0, 'something was logged')
  t.notOk(lines.some(isJson), `no line is JSON (${stdout})`)
  t.match(stdout, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: with headers$/m, 'time, level and message on one line, no colour codes in a pipe')
  t.match(stdout, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: incoming request$/m, 'Fastify logs through pino-pretty too')
  t.equal(stdout.split('[redacted]').length - 1, 3, 'authorization, x-test-user and cookie are each redacted')
  for (const secret of SECRETS) t.notOk(stdout.includes(secret), `${secret.slice(0, 12)}… is never printed`)
})

t.test('the same child with LOG_FORMAT unset and stdout a pipe keeps JSON lines', async (t) => {
  const { code, stdout, stderr } = await run('')
  t.equal(code, 0, `exit 0 (${stderr})`)
  const lines = stdout.split('\n').filter((line) => line.trim() !== '')
  t.ok(lines.length > 0 && lines.every(isJson), `every line is JSON (${stdout})`)
  t.match(JSON.parse(lines[0] ?? '{}'), { msg: 'with headers', req: { headers: { authorization: '[redacted]', 'x-test-user': '[redacted]', cookie: '[redacted]' } } })
  for (const secret of SECRETS) t.notOk(stdout.includes(secret), `${secret.slice(0, 12)}… is never printed`)
})
