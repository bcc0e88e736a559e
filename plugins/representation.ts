// representation: the answer of a tagged read (CONTRACT 12), sent by one reply decorator: the ETag, the
// 304, the Link of a page, the body serialized once per payload object and compressed once per encoding.
import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { Conditional, Revalidated } from '../src/http-cache/entity-tag.js'
import { createRepresentation, type Compress, type Representation, type RepresentationOptions } from '../src/http-cache/representation.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** How the route's tagged reads are represented: Cache-Control, the body's scope, page links. */
    representation?: Omit<RepresentationOptions, 'compress'>
  }
  interface FastifyRequest {
    /** What a read for this request is revalidated against: its If-None-Match, and whom the body is for. */
    conditional: () => Conditional
  }
  interface FastifyReply {
    /** Sends what a tagged read gave back: 304 with the tag, or the body with its tag (and Link, on a page). */
    represent: <T extends object>(result: Revalidated<T>) => Promise<FastifyReply>
  }
}

export interface RepresentationPluginOptions {
  /** The compressor; src/http-cache/representation.ts's unless a test counts its calls. */
  compress?: Compress
}

export default fp<RepresentationPluginOptions>(async function representation (app, opts) {
  // One per route, keyed by its config (one object per route, HEAD included): a payload's bytes are the
  // route's own, serialized by its response schema.
  const byRoute = new WeakMap<object, Representation>()

  function representationOf (request: FastifyRequest): Representation {
    const config = request.routeOptions.config
    let found = byRoute.get(config)
    if (found === undefined) {
      if (config.representation === undefined) throw new Error(`${config.method} ${config.url} declares no representation`)
      found = createRepresentation({ ...config.representation, compress: opts.compress })
      byRoute.set(config, found)
    }
    return found
  }

  app.decorateRequest('conditional', function (this: FastifyRequest) {
    return representationOf(this).conditional(this)
  })
  app.decorateReply('represent', function <T extends object>(this: FastifyReply, result: Revalidated<T>) {
    return representationOf(this.request).send(this.request, this, result)
  })
}, { name: 'representation', fastify: '5.x' })
