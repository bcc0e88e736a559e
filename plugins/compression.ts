// compression: br and gzip for every response of 1 KiB or more (CONTRACT 12), and Vary: Accept-Encoding on every response.
import { constants } from 'node:zlib'
import compress from '@fastify/compress'
import fp from 'fastify-plugin'
import { BROTLI_QUALITY, COMPRESS_THRESHOLD } from '../src/http-cache/representation.js'

/**
 * The cached reads compress their own bytes once per encoding (src/http-cache/representation.ts) and set
 * Content-Encoding, which @fastify/compress leaves alone; it compresses everything else as it is
 * sent. Both negotiate with @fastify/accept-negotiator, so both choose alike.
 */
export default fp(async function compression (app) {
  await app.register(compress, {
    global: true,
    encodings: ['br', 'gzip'],
    threshold: COMPRESS_THRESHOLD,
    brotliOptions: { params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } },
    // Request bodies are never inflated: JSON of at most 100 KiB needs no compression, and inflating
    // a small body into a huge one is an attack, not a feature.
    globalDecompression: false
  })
  // Every response says it varies by encoding: one too small to compress today may not be tomorrow, and
  // caches must keep encodings apart. Set before anything else runs, so CORS adds Origin to it; a static
  // header costs less than inspecting each response in onSend.
  app.addHook('onRequest', function (_request, reply, done) {
    reply.header('vary', 'accept-encoding')
    done()
  })
}, { name: 'compression', fastify: '5.x' })
