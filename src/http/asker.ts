import type { FastifyRequest } from 'fastify'
import type { Asker } from '../db/heavy-reads.js'

/**
 * Who a request's heavy reads are for (CONTRACT 16), read only when one of them starts. Most list and
 * search requests never walk, and both parts cost each request otherwise: the address goes through
 * proxy-addr under TRUST_PROXY, and the signal is an AbortController with a listener on the request.
 * A class, so that its getters are shared rather than made anew for each request.
 */
class RequestAsker implements Asker {
  readonly #request: FastifyRequest
  #address: string | undefined

  constructor (request: FastifyRequest) {
    this.#request = request
  }

  get address (): string {
    this.#address ??= this.#request.ip
    return this.#address
  }

  get signal (): AbortSignal {
    // The request's signal aborts when the request closes; one made after that would never abort.
    return this.#request.raw.socket?.destroyed === true ? AbortSignal.abort() : this.#request.signal
  }
}

export function askerOf (request: FastifyRequest): Asker {
  return new RequestAsker(request)
}
