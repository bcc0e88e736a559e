import type { FastifyReply } from 'fastify'

const JSON_TYPE = 'application/json; charset=utf-8'

/**
 * A sender for one route that serializes each payload object once, with the route's own response schema
 * (`reply.serialize`), and sends the remembered JSON when the same object is sent again. Pages served from
 * the page cache are such objects: a burst of requests for page 1 serializes it once. Entries live as long
 * as their payload does.
 */
export function createSerializedSender (): (reply: FastifyReply, payload: object) => FastifyReply {
  const bodies = new WeakMap<object, Buffer>()
  return function send (reply, payload) {
    let body = bodies.get(payload)
    if (body === undefined) {
      // Kept encoded: a string would be encoded to UTF-8 again on every write.
      body = Buffer.from(reply.serialize(payload) as string)
      bodies.set(payload, body)
    }
    return reply.type(JSON_TYPE).send(body)
  }
}

/** Sends JSON that is already serialized (a stored response), typed as every JSON answer is. */
export function sendJson (reply: FastifyReply, body: string | Buffer): FastifyReply {
  return reply.type(JSON_TYPE).send(body)
}
