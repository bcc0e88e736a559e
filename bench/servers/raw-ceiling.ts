/**
 * THE CEILING of the load benchmark (docs/performance.md). Not part of the service.
 *
 * Raw `node:http`, no framework and no database: the fastest Node can answer on this machine.
 * - GET /health: `{"ok":true}`.
 * - GET /v2/messages: a precomputed page-1 body per `limit` (read once from CEILING_PAGES_FILE, JSON
 *   `{ "25": page, "100": page }`), whatever the rest of the query.
 * - GET /v2/hello: RS256 verification with a key imported once (jose `importJWK`), then the greeting.
 * - POST /v2/messages: the same verification, the JSON body read and parsed, and a 201 with the message as
 *   the service renders it, numbered by a counter: what a create costs without a database.
 *
 * Environment: PORT, HOST (default 127.0.0.1), CEILING_PAGES_FILE, CEILING_JWK (the public JWK, JSON),
 * AUTH_ISSUER, API_AUDIENCE.
 */
import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { importJWK, jwtVerify, type JWK } from 'jose'

const issuer = (process.env.AUTH_ISSUER ?? '').replace(/\/$/, '')
const audience = process.env.API_AUDIENCE ?? 'backend-3-messages'
const key = await importJWK(JSON.parse(process.env.CEILING_JWK ?? '{}') as JWK, 'RS256')
const pages = new Map(Object.entries(JSON.parse(readFileSync(process.env.CEILING_PAGES_FILE ?? '', 'utf8')) as Record<string, unknown>)
  .map(([limit, body]) => [limit, Buffer.from(JSON.stringify(body))]))
const health = Buffer.from('{"ok":true}')
const unauthorized = Buffer.from('{"error":"Invalid or missing token"}')
const forbidden = Buffer.from('{"error":"Insufficient permissions"}')
const notFound = Buffer.from('{"error":"Not found"}')
const RANKED = new Set(['Admin', 'SuperAdmin', 'Owner'])
const badRequest = Buffer.from('{"error":"Invalid request body"}')
const PRIORITIES = new Set(['low', 'normal', 'high', 'urgent'])
let created = 0

function send (res: ServerResponse, status: number, body: Buffer | string, location?: string): void {
  const headers: Record<string, string | number> = { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }
  if (location !== undefined) headers.location = location
  res.writeHead(status, headers)
  res.end(body)
}

async function readJson (req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

/** The verified claims of the request's bearer token, or undefined after answering 401. */
async function verified (req: IncomingMessage, res: ServerResponse): Promise<Record<string, unknown> | undefined> {
  const header = req.headers.authorization ?? ''
  if (!/^bearer /i.test(header)) {
    send(res, 401, unauthorized)
    return undefined
  }
  try {
    return (await jwtVerify(header.slice(7), key, { issuer, audience, algorithms: ['RS256'] })).payload
  } catch {
    send(res, 401, unauthorized)
    return undefined
  }
}

async function create (req: IncomingMessage, res: ServerResponse): Promise<void> {
  const claims = await verified(req, res)
  if (claims === undefined) return
  const body = await readJson(req).catch(() => undefined) as { content?: unknown, subject?: unknown, priority?: unknown } | undefined
  const priority = body?.priority ?? 'normal'
  if (typeof body?.content !== 'string' || body.content.length === 0 || !PRIORITIES.has(String(priority))) return send(res, 400, badRequest)
  const id = ++created
  const message = {
    id,
    content: body.content,
    subject: typeof body.subject === 'string' ? body.subject : null,
    priority,
    author: { id: 1, name: typeof claims.name === 'string' ? claims.name : null },
    createdAt: new Date().toISOString()
  }
  send(res, 201, JSON.stringify(message), `/v2/messages/${id}`)
}

const server = createServer((req, res) => {
  const [path, search] = (req.url ?? '/').split('?')
  if (req.method === 'GET' && path === '/health') return send(res, 200, health)
  if (req.method === 'GET' && path === '/v2/messages') {
    const page = pages.get(new URLSearchParams(search).get('limit') ?? '25')
    return page === undefined ? send(res, 404, notFound) : send(res, 200, page)
  }
  if (req.method === 'GET' && path === '/v2/hello') {
    verified(req, res).then((payload) => {
      if (payload === undefined) return
      const role = String(payload.role ?? 'User')
      if (!RANKED.has(role)) return send(res, 403, forbidden)
      send(res, 200, JSON.stringify({ message: `Hello, ${String(payload.email ?? '')}!`, role }))
    }, () => send(res, 500, notFound))
    return
  }
  if (req.method === 'POST' && path === '/v2/messages') {
    create(req, res).catch(() => send(res, 500, notFound))
    return
  }
  send(res, 404, notFound)
})
server.keepAliveTimeout = 30_000
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1')
