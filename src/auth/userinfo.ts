import { Agent, request } from 'undici'
import { IdentityProviderError } from '../errors.js'

export interface UserinfoProfile {
  sub: string
  email: string | null
  name: string | null
  role: string | null
}

export type FetchUserinfo = (accessToken: string) => Promise<UserinfoProfile>

const stringOrNull = (value: unknown): string | null => typeof value === 'string' ? value : null

const unreachable = (cause?: unknown) => new IdentityProviderError({ cause })

/** Calls `<issuer>/v2/oauth/userinfo` with the caller's own token (CONTRACT 4). */
export function createUserinfoClient (options: { issuer: string, timeoutMs?: number }): { fetch: FetchUserinfo, close: () => Promise<void> } {
  const timeoutMs = options.timeoutMs ?? 5000
  const url = `${options.issuer}/v2/oauth/userinfo`
  const dispatcher = new Agent({ connectTimeout: timeoutMs, headersTimeout: timeoutMs, bodyTimeout: timeoutMs })

  async function fetchUserinfo (accessToken: string): Promise<UserinfoProfile> {
    let response
    try {
      response = await request(url, {
        dispatcher,
        headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' },
        signal: AbortSignal.timeout(timeoutMs)
      })
    } catch (err) {
      throw unreachable(err)
    }
    if (response.statusCode !== 200) {
      await response.body.dump()
      throw unreachable(new Error(`userinfo answered ${response.statusCode}`))
    }
    let body: Record<string, unknown>
    try {
      body = await response.body.json() as Record<string, unknown>
    } catch (err) {
      throw unreachable(err)
    }
    if (typeof body.sub !== 'string') throw unreachable(new Error('userinfo without sub'))
    return { sub: body.sub, email: stringOrNull(body.email), name: stringOrNull(body.name), role: stringOrNull(body.role) }
  }

  return { fetch: fetchUserinfo, close: () => dispatcher.close() }
}
