import type { Test } from 'tap'
import { postBodies } from '../../bench/load/message-bodies.js'
import { startDevIdp } from './dev-idp-server.js'
import { processDatabase, startServer, type ServerProcess } from './server-process.js'

export interface SeededService {
  server: ServerProcess
  /** The development identity provider the service trusts, as a deployment's own. */
  issuer: string
  /** Mints a token for `sub` with `role` at the identity provider (POST /token, CONTRACT 3). */
  mint: (sub: string, role: string) => Promise<string>
  /** The messages the service states it holds. */
  total: () => Promise<number>
}

/**
 * The real service as a deployment runs it, in a process of its own on 127.0.0.1 (PGlite on disk, or a
 * fresh database when TEST_DATABASE_URL is set), trusting a development identity provider of its own on
 * a loopback port, with `messages` generated messages created through the API.
 */
export async function startSeededService (t: Test, messages: number): Promise<SeededService> {
  const database = await processDatabase(t)
  const audience = 'backend-3-messages'
  const issuer = await startDevIdp(t, audience)
  const server = await startServer(t, { ...database.env, AUTH_ISSUER: issuer, API_AUDIENCE: audience }, database.cwd)
  const mint = async (sub: string, role: string): Promise<string> => {
    const response = await fetch(`${issuer}/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sub, role }) })
    return (await response.json() as { access_token: string }).access_token
  }
  const total = async (): Promise<number> => {
    const page = await (await fetch(`${server.url}/v2/messages?limit=1`)).json() as { pagination: { total: number } }
    return page.pagination.total
  }
  // Created through the API, as the benchmark's POST rows create them: a few writers at a time.
  const token = await mint('seed-writer', 'User')
  const bodies = postBodies().slice(0, messages)
  // A create that is shed (503 with Retry-After: the loop of a service just started, on a busy machine) is sent again.
  const create = async (body: string, attempt = 1): Promise<void> => {
    const response = await fetch(`${server.url}/v2/messages`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body })
    const text = await response.text()
    if (response.status === 201) return
    const retryAfter = Number(response.headers.get('retry-after'))
    if (response.status !== 503 || !(retryAfter > 0) || attempt >= 20) throw new Error(`seeding: POST /v2/messages answered ${response.status}: ${text}`)
    await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000))
    await create(body, attempt + 1)
  }
  const write = async (): Promise<void> => {
    for (let body = bodies.pop(); body !== undefined; body = bodies.pop()) await create(body)
  }
  await Promise.all(Array.from({ length: 4 }, write))
  return { server, issuer, mint, total }
}
