import { context, SpanStatusCode, type Span } from '@opentelemetry/api'
import {
  ATTR_ERROR_TYPE, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_HTTP_ROUTE, ATTR_NETWORK_PROTOCOL_VERSION, ATTR_URL_PATH, ATTR_URL_SCHEME
} from '@opentelemetry/semantic-conventions'
import type {} from '@fastify/otel'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { tieLoggerToSpan } from './log-ids.js'

// The server span of a request, as @fastify/otel starts it (one per request, named `request`),
// made into CONTRACT 15's: named by method and route template, with the HTTP attributes of the
// semantic conventions that say nothing of the caller. No header is recorded (a user agent, an
// address from X-Forwarded-For, a Host), and the path goes without its query (a search term, a sync
// token).

/** A Fastify route as the contract and the OpenAPI document write it: `/v2/messages/:id` is `/v2/messages/{id}`. */
export function routeTemplate (url: string): string {
  return url.replace(/:(\w+)(\([^)]*\))?/g, '{$1}')
}

/** @fastify/otel's requestHook: runs as the span starts, before any other hook of the request. */
export function nameServerSpan (span: Span, request: FastifyRequest): void {
  const route = request.routeOptions.url
  const template = route === undefined ? undefined : routeTemplate(route)
  span.updateName(template === undefined ? request.method : `${request.method} ${template}`)
  const query = request.url.indexOf('?')
  span.setAttributes({
    [ATTR_URL_PATH]: query < 0 ? request.url : request.url.slice(0, query),
    [ATTR_URL_SCHEME]: request.protocol,
    [ATTR_NETWORK_PROTOCOL_VERSION]: request.raw.httpVersion,
    ...(template === undefined ? {} : { [ATTR_HTTP_ROUTE]: template })
  })
}

/**
 * The request's context beyond @fastify/otel's own hooks, from its first onRequest on:
 * - the request body's events come from the socket, outside the request's context: bound to it,
 *   the handler after a parsed body runs in it, so what the handler does is under the server span;
 * - the request's logger is tied to its span (log-ids.ts);
 * - a response that closes without finishing (a client that leaves an event stream, or any
 *   request, first) runs no onResponse hook, where @fastify/otel ends the span: it is ended here.
 */
export function followRequest (request: FastifyRequest, reply: FastifyReply): void {
  const { span, context: requestContext } = request.opentelemetry()
  if (span == null || requestContext == null) return
  context.bind(requestContext, request.raw)
  tieLoggerToSpan(request.log, span.spanContext())
  reply.raw.once('close', () => {
    if (!span.isRecording()) return
    span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, reply.statusCode)
    span.end()
  })
}

// Requests whose handling threw: @fastify/otel has set their span's status to an error described by
// the thrown error's message.
const failed = new WeakSet<FastifyRequest>()

/** onError, before @fastify/otel's own (the route's last). */
export function noteFailure (request: FastifyRequest): void {
  failed.add(request)
}

/**
 * onSend, before @fastify/otel ends the span (its onSend is the route's last): an error's status
 * keeps no description. @fastify/otel copies the thrown error's message there, and some quote the
 * request (JSON.parse quotes the body it failed on). A 5xx names its class by status, as the
 * conventions say; setStatus cannot unset the error of a 4xx that threw, only drop its description.
 */
export function settleServerStatus (request: FastifyRequest, reply: FastifyReply): void {
  const { span } = request.opentelemetry()
  if (span == null || !span.isRecording()) return
  if (reply.statusCode >= 500) span.setAttribute(ATTR_ERROR_TYPE, String(reply.statusCode))
  if (reply.statusCode >= 500 || failed.has(request)) span.setStatus({ code: SpanStatusCode.ERROR })
}
