/** The callers of the authenticated rows: bearer tokens signed with the loopback identity provider's keys. */
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
  hello: string
  post: (target: Target | 'sync' | 'flood' | `live${string}`) => Promise<string[]>
  /**
   * The Platformatic peer's POST callers: seeded users, each token with the id of its user. The peer has no
   * local users (it cannot provision a new subject), so every body names its author.
   */
  peerPost: (oracle: Oracle) => Promise<Array<{ token: string, authorId: number }>>
}

export async function createTokens ({ keys, issuer, audience }: Identity): Promise<Tokens> {
  const sign = createTokenSigner(keys, { issuer, audience })
  const token = async (sub: string, role: string, email?: string, name?: string): Promise<string> => (await sign({ sub, role, email, name })).accessToken
  const runId = Date.now().toString(36)
  return {
    hello: await token('bench-admin', 'Admin', 'bench-admin@example.com', 'Bench Admin'),
    // Half seeded authors, half subjects never seen before (new per run and server), so provisioning is measured.
    post: async (target) => Promise.all(Array.from({ length: POST_SUBJECTS }, async (_, i) => {
      if (i % 2 === 0) {
        const user = seedUser(i + 1)
        return token(user.subjectId, user.role, user.email, user.name)
      }
      return token(`bench-${runId}-${target}-${i}`, 'User')
    })),
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
