import { promisify } from 'node:util'
import { brotliCompress, brotliCompressSync, constants, gzip, gzipSync } from 'node:zlib'
import negotiate from '@fastify/accept-negotiator'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { conditionalFor, type Conditional, type Revalidated } from './entity-tag.js'
import { pageLinks, type PageLinksOf } from './links.js'
import { SECURITY_HEADER_NAMES } from '../http/security-headers.js'

// The tagged, serialized and compressed answer of a read (CONTRACT 12), made in one place. A payload
// object the caches serve again (a remembered page, a remembered message) is serialized once with the
// route's response schema and compressed once per encoding: its bytes live as long as the object does.

const JSON_TYPE = 'application/json; charset=utf-8'

/** Bodies below this are sent as they are: compressing them saves less than its headers cost. */
export const COMPRESS_THRESHOLD = 1024
/**
 * Brotli quality 5: smaller than gzip -6 in a fraction of a millisecond a page; quality 11 saves a few
 * percent more for tens of times as long (docs/clients.md, "Compression";
 * docs/performance.md#compression-of-cached-pages).
 */
export const BROTLI_QUALITY = 5
/** The encodings offered, in the order preferred when the client weighs them equally. */
export const ENCODINGS = ['br', 'gzip', 'identity'] as const
type Encoding = typeof ENCODINGS[number]

// Small bodies are compressed on the event loop; larger ones on libuv's pool, so a 100-item page of long
// messages never stalls other requests for the milliseconds it takes.
const SYNC_LIMIT = 32 * 1024
const brotliAsync = promisify(brotliCompress)
const gzipAsync = promisify(gzip)

export type Compress = (body: Buffer, encoding: 'br' | 'gzip') => Buffer | Promise<Buffer>

export function compress (body: Buffer, encoding: 'br' | 'gzip'): Buffer | Promise<Buffer> {
  const sync = body.length <= SYNC_LIMIT
  if (encoding === 'br') {
    const options = {
      params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY, [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT, [constants.BROTLI_PARAM_SIZE_HINT]: body.length }
    }
    return sync ? brotliCompressSync(body, options) : brotliAsync(body, options)
  }
  return sync ? gzipSync(body) : gzipAsync(body)
}

/** The encoding to send: the client's preference among ours (q-values honoured), else identity. */
export function chooseEncoding (acceptEncoding: string | undefined): Encoding {
  if (acceptEncoding === undefined) return 'identity'
  // `x-gzip` is gzip (RFC 9110 8.4.1.3).
  return negotiate(acceptEncoding.toLowerCase().replace(/x-gzip/g, 'gzip'), [...ENCODINGS]) ?? 'identity'
}

interface Encoded {
  identity: Buffer
  br?: Buffer | Promise<Buffer>
  gzip?: Buffer | Promise<Buffer>
}

export interface RepresentationOptions {
  /** Cache-Control of the 200 and of the 304: `no-cache` for public reads, `private, no-cache` for the caller's own. */
  cacheControl: 'no-cache' | 'private, no-cache'
  /** Who the body is for, when it depends on the caller; public reads leave it out. */
  scope?: (request: FastifyRequest) => string
  /** The body is a collection page: its 200 carries the RFC 8288 `Link` of its pagination. */
  links?: boolean
  /** The compressor; `compress` above unless a test counts its calls. */
  compress?: Compress
}

/**
 * The representations of one route (CONTRACT 12): `conditional` is what a read of the route's
 * capability is revalidated against, and `send` answers with what the read gave back: 304 with the
 * tag, or the body with its tag, serialized once per payload object and compressed once per encoding.
 */
export function createRepresentation (options: RepresentationOptions) {
  const encodedBodies = new WeakMap<object, Encoded>()
  const compressBody = options.compress ?? compress

  function encodedOf (reply: FastifyReply, payload: object): Encoded {
    let encoded = encodedBodies.get(payload)
    if (encoded === undefined) {
      // Kept as bytes: a string would be encoded to UTF-8 again on every write.
      encoded = { identity: Buffer.from(reply.serialize(payload) as string) }
      encodedBodies.set(payload, encoded)
    }
    return encoded
  }

  async function bodyFor (encoded: Encoded, encoding: Encoding): Promise<Buffer> {
    if (encoding === 'identity') return encoded.identity
    let body = encoded[encoding]
    if (body === undefined) {
      body = compressBody(encoded.identity, encoding)
      // A failed compression is not remembered; the next request tries again.
      if (body instanceof Promise) body.catch(() => { if (encoded[encoding] === body) delete encoded[encoding] })
      encoded[encoding] = body
    }
    return body
  }

  return {
    /** The request's If-None-Match, and whom the body is for. */
    conditional: (request: FastifyRequest): Conditional => conditionalFor(request.headers, options.scope?.(request) ?? ''),

    async send<T extends object> (request: FastifyRequest, reply: FastifyReply, result: Revalidated<T>): Promise<FastifyReply> {
      reply.header('etag', result.tag).header('cache-control', options.cacheControl)
      if (result.notModified) {
        for (const name of SECURITY_HEADER_NAMES) reply.removeHeader(name)
        return reply.code(304).send()
      }
      if (options.links === true) reply.header('link', pageLinks(request.url, result.value as unknown as PageLinksOf))
      const encoded = encodedOf(reply, result.value)
      const encoding = encoded.identity.length < COMPRESS_THRESHOLD ? 'identity' : chooseEncoding(request.headers['accept-encoding'])
      const body = await bodyFor(encoded, encoding)
      if (encoding !== 'identity') reply.header('content-encoding', encoding)
      return reply.type(JSON_TYPE).send(body)
    }
  }
}

export type Representation = ReturnType<typeof createRepresentation>

/** Sends JSON that is already serialized (a stored response), typed as every JSON answer is. */
export function sendJson (reply: FastifyReply, body: string | Buffer): FastifyReply {
  return reply.type(JSON_TYPE).send(body)
}

/** The caller as far as a private body depends on it: subject and role (role gates decide what it sees). */
export const callerScope = (request: FastifyRequest): string => `${request.user?.sub ?? ''}\0${request.user?.role ?? ''}`
