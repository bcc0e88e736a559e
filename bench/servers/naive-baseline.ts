/**
 * THE NAIVE BASELINE of the load benchmark (docs/performance.md). Not part of the service.
 *
 * The obvious code a team would write for the same routes: Fastify 5 and the `postgres` driver directly,
 * `count(*)` plus `LIMIT/OFFSET` for every page, `ILIKE` for search, and bearer tokens verified the plain way
 * with jose (`createRemoteJWKSet` + `jwtVerify`). Same database, schema and response shapes as the service, so
 * `npm run bench` can measure both on the same data in the same run. Deliberately no tricks.
 *
 * Environment: PORT, HOST (default 127.0.0.1), DATABASE_URL (postgres://), AUTH_ISSUER, API_AUDIENCE.
 */
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify'
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose'
import postgres from 'postgres'

// Named, so the benchmark can cancel the queries a finished row left running (bench/database/wait-quiet.ts).
const sql = postgres(process.env.DATABASE_URL ?? '', { max: 10, onnotice: () => {}, connection: { application_name: 'bench-baseline' } })
const issuer = (process.env.AUTH_ISSUER ?? '').replace(/\/$/, '')
const audience = process.env.API_AUDIENCE ?? 'backend-3-messages'
const jwks = createRemoteJWKSet(new URL(`${issuer}/.well-known/jwks.json`))

const ROLES = ['User', 'Moderator', 'Admin', 'SuperAdmin', 'Owner']
const PRIORITIES = ['low', 'normal', 'high', 'urgent']
const SORTS: Record<string, string> = { id: 'm.id', createdAt: 'm.created_at', priority: 'm.priority', subject: 'm.subject' }

interface MessageRow { id: string, content: string, subject: string | null, priority: string, author_id: string, author_name: string | null, created_at: Date }

const toItem = (r: MessageRow): Record<string, unknown> => ({
  id: Number(r.id),
  content: r.content,
  subject: r.subject,
  priority: r.priority,
  author: { id: Number(r.author_id), name: r.author_name },
  createdAt: r.created_at.toISOString()
})

function pageParams (query: Record<string, string | undefined>): { page: number, limit: number } {
  const number = (value: string | undefined, fallback: number): number => {
    const n = Math.trunc(Number(value ?? fallback))
    return Number.isFinite(n) ? n : fallback
  }
  return { page: Math.max(1, number(query.page, 1)), limit: Math.min(100, Math.max(1, number(query.limit, 25))) }
}

/** count(*) for the total, then the page with LIMIT/OFFSET. */
async function listMessages (query: Record<string, string | undefined>, where: postgres.PendingQuery<postgres.Row[]>): Promise<unknown> {
  const { page, limit } = pageParams(query)
  const column = SORTS[query.sort ?? 'id'] ?? 'm.id'
  const order = query.order === 'desc' ? 'desc' : 'asc'
  const [{ total }] = await sql<Array<{ total: number }>>`select count(*)::int as total from messages m where ${where}` as unknown as [{ total: number }]
  const rows = await sql<MessageRow[]>`
    select m.id, m.content, m.subject, m.priority, m.author_id, u.name as author_name, m.created_at
    from messages m join users u on u.id = m.author_id
    where ${where}
    order by ${sql.unsafe(`${column} ${order}`)}, m.id asc
    limit ${limit} offset ${(page - 1) * limit}`
  return { data: rows.map(toItem), pagination: { page, limit, total, totalPages: Math.ceil(total / limit) } }
}

function filters (query: Record<string, string | undefined>): postgres.PendingQuery<postgres.Row[]> {
  let where = sql`true`
  if (query.priority !== undefined) where = sql`${where} and m.priority = ${query.priority}`
  if (query.authorId !== undefined) where = sql`${where} and m.author_id = ${Number(query.authorId)}`
  if (query.subject !== undefined) where = sql`${where} and m.subject = ${query.subject}`
  return where
}

async function authenticate (request: FastifyRequest, reply: FastifyReply): Promise<JWTPayload | undefined> {
  const header = request.headers.authorization ?? ''
  try {
    if (!/^bearer /i.test(header)) throw new Error('no token')
    const { payload } = await jwtVerify(header.slice(7), jwks, { issuer, audience, algorithms: ['RS256'] })
    return payload
  } catch {
    await reply.code(401).header('www-authenticate', 'Bearer').send({ error: 'Invalid or missing token' })
    return undefined
  }
}

const app = Fastify({ logger: false })

app.get('/health', async () => ({ ok: true }))

app.get('/v2/messages', async (request, reply) => {
  const query = request.query as Record<string, string | undefined>
  if (query.priority !== undefined && !PRIORITIES.includes(query.priority)) {
    return reply.code(400).send({ error: 'Validation failed', details: ['priority must be one of low, normal, high, urgent'] })
  }
  return listMessages(query, filters(query))
})

app.get('/v2/messages/search', async (request, reply) => {
  const query = request.query as Record<string, string | undefined>
  const q = (query.q ?? '').trim()
  if (q === '') return reply.code(400).send({ error: 'Missing required query parameter: q' })
  const pattern = `%${q.replace(/[\\%_]/g, (c) => '\\' + c)}%`
  return listMessages(query, sql`(m.content ilike ${pattern} or m.subject ilike ${pattern})`)
})

app.get('/v2/hello', async (request, reply) => {
  const claims = await authenticate(request, reply)
  if (claims === undefined) return reply
  const role = String(claims.role ?? 'User')
  if (ROLES.indexOf(role) < ROLES.indexOf('Admin')) return reply.code(403).send({ error: 'Insufficient permissions' })
  return { message: `Hello, ${String(claims.email ?? '')}!`, role }
})

app.post('/v2/messages', async (request, reply) => {
  const claims = await authenticate(request, reply)
  if (claims === undefined) return reply
  const body = request.body as { content?: unknown, subject?: unknown, priority?: unknown } | null
  if (typeof body?.content !== 'string' || body.content.trim() === '') {
    return reply.code(400).send({ error: 'Validation failed', details: ['content is required and must be a string'] })
  }
  // Look the caller up; insert the local user on first sight.
  let [user] = await sql<Array<{ id: string, name: string | null }>>`select id, name from users where subject_id = ${claims.sub!}`
  if (user === undefined) {
    [user] = await sql<Array<{ id: string, name: string | null }>>`
      insert into users (subject_id, email, name, role)
      values (${claims.sub!}, ${(claims.email as string | undefined) ?? null}, ${(claims.name as string | undefined) ?? null}, 'User')
      on conflict (subject_id) do update set updated_at = now()
      returning id, name`
  }
  const [row] = await sql<MessageRow[]>`
    insert into messages (content, subject, priority, author_id)
    values (${body.content}, ${typeof body.subject === 'string' ? body.subject : null},
      ${typeof body.priority === 'string' ? body.priority : 'normal'}, ${user!.id})
    returning id, content, subject, priority, author_id, ${user!.name} as author_name, created_at`
  return reply.code(201).header('location', `/v2/messages/${row!.id}`).send(toItem(row!))
})

await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' })
