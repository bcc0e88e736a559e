/**
 * THE CEILING of the load benchmark (docs/benchmarks.md). Not part of the service.
 *
 * Raw `node:http`, no framework and no database: the fastest Node can answer on this machine.
 * - GET /health: `{"ok":true}`.
 * - GET /v2/messages: a precomputed page-1 body per `limit` (read once from CEILING_PAGES_FILE, JSON
 *   `{ "25": page, "100": page }`), whatever the rest of the query.
 * - GET /v2/hello: RS256 verification with a key imported once (jose `importJWK`), then the greeting.
 *
 * Environment: PORT, HOST (default 127.0.0.1), CEILING_PAGES_FILE, CEILING_JWK (the public JWK, JSON),
 * AUTH_ISSUER, API_AUDIENCE.
 */
import { readFileSync } from 'node:fs'
import { createServer, type ServerResponse } from 'node:http'
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

function send (res: ServerResponse, status: number, body: Buffer | string): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

const server = createServer((req, res) => {
  const [path, search] = (req.url ?? '/').split('?')
  if (req.method === 'GET' && path === '/health') return send(res, 200, health)
  if (req.method === 'GET' && path === '/v2/messages') {
    const page = pages.get(new URLSearchParams(search).get('limit') ?? '25')
    return page === undefined ? send(res, 404, notFound) : send(res, 200, page)
  }
  if (req.method === 'GET' && path === '/v2/hello') {
    const header = req.headers.authorization ?? ''
    if (!/^bearer /i.test(header)) return send(res, 401, unauthorized)
    jwtVerify(header.slice(7), key, { issuer, audience, algorithms: ['RS256'] }).then(({ payload }) => {
      const role = String(payload.role ?? 'User')
      if (!RANKED.has(role)) return send(res, 403, forbidden)
      send(res, 200, JSON.stringify({ message: `Hello, ${String(payload.email ?? '')}!`, role }))
    }, () => send(res, 401, unauthorized))
    return
  }
  send(res, 404, notFound)
})
server.keepAliveTimeout = 30_000
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1')
