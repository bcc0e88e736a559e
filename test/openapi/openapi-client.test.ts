import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { build } from '../helpers/build.js'
import { startTestIdp } from '../helpers/idp.js'
import { generateClientTypes } from '../helpers/openapi.js'
import { walk } from '../client/walkthrough.js'

// A client generated from the served document (openapi-typescript + openapi-fetch) drives the README
// walk-through against a real server with real tokens. The committed types must be what the document
// generates, and the walk-through must compile against them strictly: a document change that would
// break a user's client code fails here.

const AUDIENCE = 'openapi-client-test'
const CLIENT_DIR = fileURLToPath(new URL('../client/', import.meta.url))
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')

const idp = await startTestIdp(t, { audience: AUDIENCE })
const app = await build(t, { config: { authIssuer: idp.url, apiAudience: AUDIENCE } })
const base = await app.listen({ host: '127.0.0.1', port: 0 })

t.test('the committed client types are what the served document generates', async (t) => {
  const document = (await app.inject('/api-docs/json')).json<Record<string, unknown>>()
  const generated = await generateClientTypes(document)
  t.equal(readFileSync(`${CLIENT_DIR}api.d.ts`, 'utf8'), generated, 'test/client/api.d.ts is current (npm run openapi:client regenerates it)')
})

t.test('the walk-through compiles against them under strict TypeScript', async (t) => {
  const { stdout } = await promisify(execFile)(process.execPath, [tsc, '-p', `${CLIENT_DIR}tsconfig.json`]).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? String(err) }))
  t.equal(stdout, '', 'tsc reports nothing')
})

t.test('the generated client walks the API', async (t) => {
  const user = await idp.sign({ sub: 'walker', role: 'User', name: 'Walker' })
  const admin = await idp.sign({ sub: 'walker-admin', role: 'Admin', email: 'admin@example.com' })
  const steps = await walk(base, { user, admin })
  t.same(steps, [
    { step: 'create', status: 201 },
    { step: 'list: 1 in all, first 1', status: 200 },
    { step: 'filter: true', status: 200 },
    { step: 'search: 1', status: 200 },
    { step: 'get: Walker', status: 200 },
    { step: 'me: User', status: 200 },
    { step: 'hello: Hello, admin@example.com!', status: 200 },
    { step: 'invalid body', status: 400, error: 'Validation failed' },
    { step: 'no token', status: 401, error: 'Invalid or missing token' },
    { step: 'below Admin', status: 403, error: 'Insufficient permissions' },
    { step: 'delete', status: 204 },
    { step: 'get deleted', status: 404, error: 'Message not found' }
  ])
})
