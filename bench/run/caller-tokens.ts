/**
 * The callers of the authenticated rows: bearer tokens signed with the loopback identity provider's keys;
 * on a target (--target), tokens read from a file or minted by the deployment's development identity provider.
 */
import { readFile } from 'node:fs/promises'
import { request } from 'undici'
import { createTokenSigner } from '../../src/dev-idp/app.js'
import { seedUser } from '../../scripts/seed.js'
import { BenchError } from './bench-error.js'
import type { Oracle } from '../checks/reference-sql.js'
import type { Target } from '../report/bench-report.js'
import type { Identity } from '../servers/child-servers.js'

export const POST_SUBJECTS = 200

/**
 * `post(name)`: callers for one server or use, new subjects named after it: `sync`, the writers of the delta
 * sync catch-up, `flood`, the writer beside the search flood, and `live-…`, the live rows' writers
 * (bench/live/), so the POST rows still provision theirs.
 */
export interface Tokens {
  /** The caller of GET /v2/hello, which needs Admin or higher. */
  hello: string
  /** The exact answer to GET /v2/hello with `hello`, when the token's claims are known. */
  helloAnswer?: string
  post: (target: Target | 'sync' | 'flood' | `live${string}`) => Promise<string[]>
  /**
   * The Platformatic peer's POST callers: seeded users, each token with the id of its user. The peer has no
   * local users (it cannot provision a new subject), so every body names its author.
   */
  peerPost: (oracle: Oracle) => Promise<Array<{ token: string, authorId: number }>>
}

type Mint = (sub: string, role: string, email?: string, name?: string) => Promise<string>

const HELLO_CALLER = { sub: 'bench-admin', role: 'Admin', email: 'bench-admin@example.com', name: 'Bench Admin' }

/** The POST callers: half seeded authors, half subjects never seen before (new per run and use), so provisioning is measured. */
async function postCallers (token: Mint, runId: string, use: string): Promise<string[]> {
  return await Promise.all(Array.from({ length: POST_SUBJECTS }, async (_, i) => {
    if (i % 2 === 0) {
      const user = seedUser(i + 1)
      return await token(user.subjectId, user.role, user.email, user.name)
    }
    return await token(`bench-${runId}-${use}-${i}`, 'User')
  }))
}

export async function createTokens ({ keys, issuer, audience }: Identity): Promise<Tokens> {
  const sign = createTokenSigner(keys, { issuer, audience })
  const token: Mint = async (sub, role, email, name) => (await sign({ sub, role, email, name })).accessToken
  const runId = Date.now().toString(36)
  return {
    hello: await token(HELLO_CALLER.sub, HELLO_CALLER.role, HELLO_CALLER.email, HELLO_CALLER.name),
    helloAnswer: `{"message":"Hello, ${HELLO_CALLER.email}!","role":"Admin"}`,
    post: async (target) => await postCallers(token, runId, target),
    peerPost: async (oracle) => {
      const users = Array.from({ length: POST_SUBJECTS }, (_, i) => seedUser(i + 1))
      const found = await oracle.rows<{ id: string, subject_id: string }>('select id, subject_id from users where subject_id = any($1::text[])', [users.map((u) => u.subjectId)])
      const ids = new Map(found.map((row) => [row.subject_id, Number(row.id)]))
      return Promise.all(users.map(async (user) => {
        const authorId = ids.get(user.subjectId)
        if (authorId === undefined) throw new BenchError(`the seeded user ${user.subjectId} is not in the database`)
        return { token: await token(user.subjectId, user.role, user.email, user.name), authorId }
      }))
    }
  }
}

const noPeer = async (): Promise<never> => { throw new BenchError('a target has no Platformatic peer beside it') }

/**
 * Tokens from a file, one bearer token a line (blank lines and lines starting with # are skipped): the
 * first is the caller of GET /v2/hello (it needs Admin), and every one of them a POST caller in turn.
 */
export async function fileTokens (path: string): Promise<Tokens> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    throw new BenchError(`--token-file ${path}: ${(err as Error).message}`)
  }
  const lines = text.split('\n').map((line) => line.trim().replace(/^Bearer\s+/i, '')).filter((line) => line !== '' && !line.startsWith('#'))
  if (lines.length === 0) throw new BenchError(`--token-file ${path} holds no token`)
  const bad = lines.findIndex((line) => !/^[\w-]+\.[\w-]+\.[\w-]*$/.test(line))
  if (bad !== -1) throw new BenchError(`--token-file ${path}: token ${bad + 1} is not a JWT`)
  return { hello: lines[0]!, post: async () => lines, peerPost: noPeer }
}

// The identity provider is asked one token at a time, each within this bound.
const IDP_TIMEOUT_MS = 5000

/**
 * Tokens minted by a deployment's development identity provider (CONTRACT 3: POST <idp>/token with JSON
 * { sub, role, email, name }), for the same callers as a run of the benchmark's own.
 */
export async function idpTokens (idp: string): Promise<Tokens> {
  const token: Mint = async (sub, role, email, name) => {
    let status: number
    let body: string
    try {
      const response = await request(`${idp}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sub, role, email, name }),
        signal: AbortSignal.timeout(IDP_TIMEOUT_MS)
      })
      status = response.statusCode
      body = await response.body.text()
    } catch (err) {
      throw new BenchError(`the identity provider at ${idp} did not answer POST /token: ${(err as Error).message}`)
    }
    const minted = (() => { try { return JSON.parse(body) as { access_token?: unknown } } catch { return undefined } })()
    if (status !== 200 || typeof minted?.access_token !== 'string') {
      throw new BenchError(`the identity provider at ${idp} answered POST /token with ${status}: ${body.slice(0, 120)} (--idp takes a development identity provider, CONTRACT 3)`)
    }
    return minted.access_token
  }
  const runId = Date.now().toString(36)
  const minted = new Map<string, string[]>()
  return {
    hello: await token(HELLO_CALLER.sub, HELLO_CALLER.role, HELLO_CALLER.email, HELLO_CALLER.name),
    helloAnswer: `{"message":"Hello, ${HELLO_CALLER.email}!","role":"Admin"}`,
    post: async (use) => {
      const known = minted.get(use) ?? await postCallers(token, runId, use)
      minted.set(use, known)
      return known
    },
    peerPost: noPeer
  }
}
