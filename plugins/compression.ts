// compression: br and gzip for every response of 1 KiB or more (CONTRACT 12), and Vary on every one that could be.
import { constants } from 'node:zlib'
import compress from '@fastify/compress'
import fp from 'fastify-plugin'
import { BROTLI_QUALITY, COMPRESS_THRESHOLD, varyOn } from '../src/lib/representation.js'

// What @fastify/compress would compress: JSON, text, HTML, JavaScript, CSS, SVG.
const COMPRESSIBLE = /^(?:text\/|application\/(?:[\w.+-]*\+)?(?:json|javascript|xml)|image\/svg\+xml)/

/**
 * The cached reads compress their own bytes once per encoding (src/lib/representation.ts) and set
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
  // A response too small to compress today may not be tomorrow, and caches must keep encodings apart.
  app.addHook('onSend', function (_request, reply, payload, done) {
    const type = reply.getHeader('content-type')
    if (typeof type === 'string' && COMPRESSIBLE.test(type)) varyOn(reply, 'accept-encoding')
    done(null, payload)
  })
}, { name: 'compression', fastify: '5.x' })
