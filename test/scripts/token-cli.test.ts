import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { decodeProtectedHeader, importJWK, jwtVerify, type JWTPayload } from 'jose'
import t, { type Test } from 'tap'
import { buildDevIdp } from '../../src/dev-idp/app.js'
import { LOADER_ARGS, LOADER_ENV } from '../helpers/server-process.js'

const SCRIPT = fileURLToPath(new URL('../../scripts/token.ts', import.meta.url))
// Absolute, because the child runs in a temporary directory where `tsx` would not resolve.
const ISSUER = 'http://localhost:3002'
const AUDIENCE = 'backend-3-messages'
const TOKEN_LINE = /^[\w-]+\.[\w-]+\.[\w-]+\n$/

interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

// The child gets the parent's environment without the variables this command reads, plus `env`.
function childEnv (env: Record<string, string>): NodeJS.ProcessEnv {
  const { AUTH_ISSUER, API_AUDIENCE, NODE_ENV, ...rest } = process.env
  return { ...rest, ...LOADER_ENV, ...env }
}

async function runCli (cwd: string, args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const child = spawn(process.execPath, [...LOADER_ARGS, SCRIPT, ...args], { cwd, env: childEnv(env) })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', resolve)
  })
  return { code, stdout, stderr }
}

async function verifyWithStoredKey (keysDir: string, token: string, audience: string = AUDIENCE): Promise<JWTPayload> {
  const stored = JSON.parse(await readFile(join(keysDir, 'keys.json'), 'utf8'))
  const { payload, protectedHeader } = await jwtVerify(token, await importJWK(stored.publicJwk, 'RS256'), {
    issuer: ISSUER, audience, algorithms: ['RS256']
  })
  if (protectedHeader.kid !== stored.kid) throw new Error('token not signed with the stored key')
  return payload
}

async function mint (t: Test, args: string[], env: Record<string, string> = {}): Promise<{ keysDir: string, token: string }> {
  const cwd = t.testdir()
  const keysDir = join(cwd, 'keys')
  const result = await runCli(cwd, [...args, '--keys-dir', keysDir], env)
  t.match(result, { code: 0, stdout: TOKEN_LINE, stderr: '' })
  return { keysDir, token: result.stdout.trim() }
}

t.test('prints only the token, signed with the key it keeps under .data/dev-idp of the working directory', async (t) => {
  const cwd = t.testdir()
  const result = await runCli(cwd, ['--sub', 'alice', '--role', 'Admin'])
  t.match(result, { code: 0, stdout: TOKEN_LINE, stderr: '' })
  const token = result.stdout.trim()
  const keysDir = join(cwd, '.data', 'dev-idp')
  t.equal((await stat(join(keysDir, 'keys.json'))).mode & 0o777, 0o600)
  t.match(decodeProtectedHeader(token), { alg: 'RS256', typ: 'JWT', kid: String })
  const claims = await verifyWithStoredKey(keysDir, token)
  const iat = claims.iat as number
  t.ok(Math.abs(iat - Date.now() / 1000) < 60, 'iat is now')
  t.same(claims, { iss: ISSUER, aud: AUDIENCE, sub: 'alice', role: 'Admin', email: 'alice@example.com', name: 'alice', iat, exp: iat + 3600 })
})

t.test('takes email, name, audience and lifetime from the options', async (t) => {
  const { keysDir, token } = await mint(t, [
    '--sub', 'bob', '--role', 'Moderator', '--email', 'bob@x.io', '--name', 'Bob B', '--aud', 'other-api', '--expires-in', '120'
  ])
  const claims = await verifyWithStoredKey(keysDir, token, 'other-api')
  const iat = claims.iat as number
  t.same(claims, { iss: ISSUER, aud: 'other-api', sub: 'bob', role: 'Moderator', email: 'bob@x.io', name: 'Bob B', iat, exp: iat + 120 })
})

t.test('uses API_AUDIENCE as the default audience and accepts the dev issuer named explicitly', async (t) => {
  const { keysDir, token } = await mint(t, ['--sub', 'carol', '--role', 'User'], { API_AUDIENCE: 'my-api', AUTH_ISSUER: `${ISSUER}/` })
  t.match(await verifyWithStoredKey(keysDir, token, 'my-api'), { aud: 'my-api', iss: ISSUER, sub: 'carol' })
})

t.test('reuses the key pair, so the running dev identity provider accepts its tokens', async (t) => {
  const cwd = t.testdir()
  const idp = await buildDevIdp({ issuer: ISSUER, audience: AUDIENCE, dataDir: join(cwd, 'keys') })
  t.teardown(() => idp.close())
  const jwks = (await idp.inject('/.well-known/jwks.json')).json()

  const result = await runCli(cwd, ['--sub', 'dave', '--role', 'Owner', '--keys-dir', join(cwd, 'keys')])
  t.equal(result.code, 0)
  t.equal(decodeProtectedHeader(result.stdout.trim()).kid, jwks.keys[0].kid)
  const response = await idp.inject({ url: '/v2/oauth/userinfo', headers: { authorization: `Bearer ${result.stdout.trim()}` } })
  t.same({ status: response.statusCode, body: response.json() }, {
    status: 200, body: { sub: 'dave', email: 'dave@example.com', name: 'dave', role: 'Owner' }
  })
})

t.test('refuses to mint for another issuer, without touching the key directory', async (t) => {
  const cwd = t.testdir()
  const keysDir = join(cwd, 'keys')
  const result = await runCli(cwd, ['--sub', 'alice', '--role', 'Admin', '--keys-dir', keysDir], { AUTH_ISSUER: 'https://idp.example.com' })
  t.same(result, {
    code: 1,
    stdout: '',
    stderr: 'token: AUTH_ISSUER is https://idp.example.com; this command mints tokens only for the local development identity provider ' +
      `(${ISSUER}). Get a token from that identity provider instead, or unset AUTH_ISSUER.\n`
  })
  t.equal(existsSync(keysDir), false)
})

t.test('refuses in production and on an invalid configuration', async (t) => {
  const cwd = t.testdir()
  const [production, badPort] = await Promise.all([
    runCli(cwd, ['--sub', 'a', '--role', 'Admin'], { NODE_ENV: 'production', AUTH_ISSUER: ISSUER }),
    runCli(cwd, ['--sub', 'a', '--role', 'Admin'], { PORT: 'seventy' })
  ])
  t.match(production, { code: 1, stdout: '', stderr: /^token: AUTH_ISSUER is http:\/\/localhost:3002 with NODE_ENV=production; / })
  t.same(badPort, { code: 1, stdout: '', stderr: 'token: Invalid PORT: must be an integer from 0 to 65535 (got "seventy")\n' })
  t.equal(existsSync(join(cwd, '.data')), false)
})

t.test('-h prints the usage, including --keys-dir, on stdout', async (t) => {
  const cwd = t.testdir()
  const result = await runCli(cwd, ['-h'])
  t.match(result, { code: 0, stderr: '', stdout: /^Usage: npm run -s token -- --sub <subject> --role <role> \[options\]\n/ })
  t.match(result.stdout, /--keys-dir <dir> +directory of the key pair \(default \.data\/dev-idp\)/)
  t.match(result.stdout, /-h, --help +show this help/)
})

t.test('rejects bad arguments with a message and the usage on stderr', async (t) => {
  const cwd = t.testdir()
  const cases: Array<[string[], RegExp]> = [
    [['--role', 'Admin'], /^token: --sub is required\n/],
    [['--sub', 'alice', '--role', ''], /^token: --role: expected string length greater or equal to 1\n/],
    [['--sub', 'alice', '--role', 'Admin', '--expires-in', 'soon'], /^token: --expires-in must be a whole number of seconds\n/],
    [['--sub', 'alice', '--role', 'Admin', '--expires-in', '86401'], /^token: --expires-in: expected integer to be less or equal to 86400\n/],
    [['--sub', 'alice', '--role', 'Admin', '--colour', 'blue'], /^token: Unknown option '--colour'\n/]
  ]
  // Independent processes, run side by side to keep the file fast.
  const results = await Promise.all(cases.map(async ([args]) => await runCli(cwd, args)))
  for (const [index, [args, message]] of cases.entries()) {
    const result = results[index]
    t.match(result, { code: 1, stdout: '', stderr: message }, args.join(' '))
    t.match(result?.stderr, /\n\nUsage: npm run -s token/)
  }
  t.equal(existsSync(join(cwd, '.data')), false)
})
