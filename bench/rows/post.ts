/**
 * The write rows, last of all: they add rows, which would move every page expectation before them.
 * POST /v2/messages against every server, and with a fresh Idempotency-Key each against the service.
 */
import { postBodies } from '../load/message-bodies.js'
import type { CannonRequest } from '../load/autocannon.js'
import { POST_SUBJECTS } from '../run/caller-tokens.js'
import { parseJson, type Item } from '../checks/answer-checks.js'
import { platformaticMessageProblem, platformaticPostBody } from '../servers/platformatic-peer.js'
import type { Target } from '../report/bench-report.js'
import type { Row, RowBuilder } from './row.js'

const verify = (b: string): string | undefined => {
  const item = parseJson(b) as Item | undefined
  return typeof item?.id === 'number' && typeof item.content === 'string' ? undefined : `not a message: ${b.slice(0, 60)}`
}

/** One POST whose n-th sending carries the token, body and headers `nth(n)` gives. */
export function rotatingPost (path: string, nth: (n: number) => { token: string, body: string, headers?: Record<string, string> }): CannonRequest[] {
  let sent = 0
  return [{
    method: 'POST',
    path,
    headers: { 'content-type': 'application/json' },
    setupRequest (request) {
      const { token, body, headers } = nth(sent++)
      return { ...request, headers: { ...request.headers, ...headers, authorization: `Bearer ${token}` }, body }
    }
  }]
}

export const postRows: RowBuilder = async ({ oracle, wanted, tokens }) => {
  if (!wanted('post') && !wanted('post-idempotent')) return []
  const bodies = postBodies()
  const perTarget = new Map<Target, string[]>()
  for (const target of ['service', 'baseline'] as const) perTarget.set(target, await tokens.post(target))
  // The ceiling writes nothing and knows no users: the service's callers will do.
  perTarget.set('ceiling', perTarget.get('service')!)
  // Every request another body and caller; with `keyed`, also a key never sent before (CONTRACT 12).
  const posts = (target: Target, keyed: boolean): CannonRequest[] => {
    const list = perTarget.get(target)!
    const prefix = `${Date.now().toString(36)}-${target}`
    return rotatingPost('/v2/messages', (n) => ({
      token: list[n % list.length]!,
      body: bodies[n % bodies.length]!,
      headers: keyed ? { 'idempotency-key': `${prefix}-${n}` } : undefined
    }))
  }
  const rows: Row[] = []
  if (wanted('post')) {
    // The peer's callers are seeded users looked up in the database; a target has no peer beside it.
    const peerCallers = oracle === undefined ? [] : await tokens.peerPost(oracle)
    // The peer's equivalent: the same bodies, each naming the caller's user as its author, answered 200.
    const peerPosts = (): CannonRequest[] => rotatingPost('/messages', (n) => {
      const caller = peerCallers[n % peerCallers.length]!
      return { token: caller.token, body: platformaticPostBody(bodies[n % bodies.length]!, caller.authorId) }
    })
    rows.push({
      key: 'post',
      name: `POST /v2/messages (${POST_SUBJECTS} subjects, RS256)`,
      targets: ['service', 'baseline', 'ceiling', 'platformatic'],
      countsWrites: true,
      requests: (target) => posts(target, false),
      verify,
      platformatic: { requests: peerPosts, verify: platformaticMessageProblem, status: 200 }
    })
  }
  if (wanted('post-idempotent')) {
    rows.push({
      key: 'post-idempotent',
      name: 'POST /v2/messages with a fresh Idempotency-Key each',
      targets: ['service'],
      countsWrites: true,
      requests: (target) => posts(target, true),
      verify,
      reference: { key: 'post', target: 0.8 }
    })
  }
  return rows
}
