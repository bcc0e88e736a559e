import { STATUS_CODES } from 'node:http'
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import type { FastifySchema } from 'fastify'
import { DOCUMENTED_ENUM, DOCUMENTED_MAX_LENGTH, DOCUMENTED_REQUIRED, ErrorSchema } from '../schemas/common.js'

// What every operation of the OpenAPI document says beyond its own route schema, decided here once:
// the statuses and headers the service-wide plugins add (rate limit, load shedding, body parsing,
// conditional requests), the public operations' empty security, and the descriptions and examples
// of responses. The routes declare what is theirs; this adds what is everyone's.

type JsonSchema = Record<string, unknown>
interface RouteSchema {
  hide?: boolean
  body?: unknown
  querystring?: JsonSchema
  security?: unknown
  response?: Record<string, JsonSchema>
  [key: string]: unknown
}

const ERROR_ID = ErrorSchema.$id
const ERROR_REF = `#/components/schemas/${ERROR_ID}`

const integerHeader = (description: string, example: number) => ({ type: 'integer', description, examples: [example] })

// @fastify/rate-limit sends these on every answer of a limited route (CONTRACT 2).
const RATE_LIMIT_HEADERS = {
  'X-RateLimit-Limit': integerHeader('Requests allowed per minute to this caller', 100),
  'X-RateLimit-Remaining': integerHeader('Requests left to this caller in the current minute', 99),
  'X-RateLimit-Reset': integerHeader('Seconds until the current minute ends', 42)
}
const RETRY_AFTER = { 'Retry-After': integerHeader('Seconds to wait before retrying', 1) }

/**
 * The 503 of an expensive read (CONTRACT 16: a search, a page the database must walk), for the route
 * schemas of those reads: beside overload, every place such reads may take, running or waiting, is taken.
 */
export const expensiveReadUnavailable = <T extends TSchema>(error: T) => Type.Unsafe<Static<T>>({
  ...error,
  description: 'Service unavailable: overloaded, or too many expensive reads (searches, pages the database must walk) running and waiting, ' +
    'from this address or from all; answered at once; retry after Retry-After seconds',
  headers: RETRY_AFTER
})
const VALIDATORS = {
  ETag: { type: 'string', description: 'The version of this representation: send it back in If-None-Match to get 304 while it is current', examples: ['"2a-1f3c9e7b"'] },
  'Cache-Control': { type: 'string', description: 'Store, but revalidate before each use', examples: ['no-cache'] }
}
const LINK = { Link: { type: 'string', description: 'RFC 8288 links to the first, previous, next and last pages', examples: ['</v2/messages?page=2&limit=25>; rel="next"'] } }

const withHeaders = (response: JsonSchema, headers: Record<string, unknown>): JsonSchema =>
  ({ ...response, headers: { ...(response.headers as Record<string, unknown> | undefined), ...headers } })

// What Node's HTTP server answers itself, before any route (plugins/errors.ts clientErrorHandler).
const MALFORMED_REQUEST = 'Malformed request: refused by the HTTP server before any route runs'
const SERVER_REFUSALS: Record<string, string> = { [MALFORMED_REQUEST]: STATUS_CODES[400]!, 431: STATUS_CODES[431]! }

const errorResponse = (description: string, headers?: Record<string, unknown>): JsonSchema =>
  ({ $ref: ERROR_ID, description, ...(headers === undefined ? {} : { headers }) })

type SecurityRequirement = Record<string, string[]>

/**
 * Public operations say so, with an empty requirement rather than none (which means "as the document
 * says"); protected ones accept the development sign-in too, when there is one.
 */
function documentSecurity (security: SecurityRequirement[] | undefined, alsoSignIn: string | undefined): SecurityRequirement[] {
  if (security === undefined || security.length === 0) return []
  return alsoSignIn === undefined ? security : [...security, { [alsoSignIn]: [] }]
}

/** A page of a collection: its shared schema is named `...Page` (pageSchema). */
const isPage = (response: JsonSchema | undefined) => typeof response?.$ref === 'string' && response.$ref.endsWith('Page')

/** Query parameters as documented: DOCUMENTED_ENUM becomes the enum, DOCUMENTED_REQUIRED required, DOCUMENTED_MAX_LENGTH the maxLength. */
function documentQuery (querystring: JsonSchema): JsonSchema {
  const properties = querystring.properties as Record<string, JsonSchema> | undefined
  if (properties === undefined) return querystring
  const documented: Record<string, JsonSchema> = {}
  const required = new Set(querystring.required as string[] | undefined)
  for (const [name, property] of Object.entries(properties)) {
    const { [DOCUMENTED_ENUM]: values, [DOCUMENTED_REQUIRED]: needed, [DOCUMENTED_MAX_LENGTH]: maxLength, ...rest } = property
    documented[name] = { ...rest, ...(values === undefined ? {} : { enum: values }), ...(maxLength === undefined ? {} : { maxLength }) }
    if (needed === true) required.add(name)
  }
  return { ...querystring, properties: documented, ...(required.size > 0 ? { required: [...required] } : {}) }
}

/**
 * The route schema as documented (the `transform` of @fastify/swagger; the route itself keeps its
 * own): every status the service-wide plugins may answer, with its headers.
 */
export interface DocumentOptions {
  /** A security scheme every protected operation also accepts (the development sign-in). */
  alsoSignIn?: string | undefined
}

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

export function documentOperation (routeSchema: FastifySchema, route: { config?: unknown, method?: string | string[] }, options: DocumentOptions = {}): FastifySchema {
  const schema = routeSchema as RouteSchema
  if (schema.hide === true) return routeSchema
  const responses: Record<string, JsonSchema> = { ...schema.response }
  // The probes (rateLimit: false) are neither rate limited nor shed (CONTRACT 11).
  const limited = (route.config as { rateLimit?: unknown } | undefined)?.rateLimit !== false
  if (schema.body !== undefined) {
    responses['413'] ??= errorResponse('Request body too large (over 100 KiB)')
    responses['415'] ??= errorResponse('Unsupported media type: the body must be application/json')
  }
  if (limited) {
    responses['429'] ??= errorResponse('Too many requests from this caller this minute; retry after Retry-After seconds', RETRY_AFTER)
    // A write is also refused while no writable database primary answers (CONTRACT 14).
    const writes = [route.method ?? []].flat().some((method) => !READ_METHODS.has(method.toUpperCase()))
    responses['503'] ??= writes
      ? errorResponse('Overloaded (the request was shed at once), or no writable database primary during a failover; retry after Retry-After seconds', RETRY_AFTER)
      : errorResponse('Overloaded: the request was shed at once; retry after Retry-After seconds', RETRY_AFTER)
  }
  responses['500'] ??= errorResponse('Internal server error')
  // Node's HTTP server refuses a malformed request, or a request line and headers over 16 KiB, before
  // any route runs, on any path, in the same { error } shape (plugins/errors.ts clientErrorHandler).
  responses['400'] ??= errorResponse(MALFORMED_REQUEST)
  responses['431'] ??= errorResponse('Request header fields too large: the request line and headers together are over 16 KiB')
  const ok = responses['200']
  if (responses['304'] !== undefined && ok !== undefined) {
    responses['200'] = withHeaders(ok, isPage(ok) ? { ...VALIDATORS, ...LINK } : VALIDATORS)
    responses['304'] = withHeaders(responses['304'], VALIDATORS)
  }
  if (limited) for (const status of Object.keys(responses)) responses[status] = withHeaders(responses[status]!, RATE_LIMIT_HEADERS)
  return {
    ...schema,
    ...(schema.querystring === undefined ? {} : { querystring: documentQuery(schema.querystring) }),
    security: documentSecurity(schema.security as SecurityRequirement[] | undefined, options.alsoSignIn),
    response: responses
  } as FastifySchema
}

// Used where a response has no description of its own.
const RESPONSE_DESCRIPTIONS: Record<string, string> = {
  400: 'Validation failed, or a malformed request',
  401: 'Invalid or missing token',
  403: 'Insufficient permissions',
  404: 'Not found',
  500: 'Internal server error',
  502: 'The identity provider or an upstream service failed or could not be reached'
}

interface Media { schema?: { $ref?: string }, example?: unknown, examples?: unknown }
interface Operation {
  requestBody?: { content?: Record<string, Media> }
  responses?: Record<string, { description?: string, content?: Record<string, Media> }>
}
interface Document {
  paths?: Record<string, Record<string, Operation>>
  components?: { schemas?: Record<string, { examples?: unknown[] }> }
}

/**
 * The finished document (the `transformObject` of @fastify/swagger): every response described, and
 * every body with an example: its schema's first, or for an error the error its status means (the
 * ErrorBody schema's own example is a validation failure, which would mislead on a 401).
 */
export function finishDocument<T extends object> (document: T): T {
  const { paths = {}, components = {} } = document as Document
  const exampleOf = (media: Media | undefined): unknown => {
    const name = media?.schema?.$ref?.split('/').pop()
    return name === undefined ? undefined : components.schemas?.[name]?.examples?.[0]
  }
  for (const pathItem of Object.values(paths)) {
    for (const operation of Object.values(pathItem)) {
      const request = operation.requestBody?.content?.['application/json']
      if (request !== undefined && request.example === undefined) request.example = exampleOf(request)
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        if (response.description === 'Default Response') {
          response.description = RESPONSE_DESCRIPTIONS[status] ?? STATUS_CODES[status] ?? 'Response'
        }
        const media = response.content?.['application/json']
        if (media === undefined || media.example !== undefined || media.examples !== undefined) continue
        const refusal = SERVER_REFUSALS[response.description ?? ''] ?? SERVER_REFUSALS[status]
        const example = refusal !== undefined
          ? { error: refusal }
          : status !== '400' && media.schema?.$ref === ERROR_REF ? { error: response.description } : exampleOf(media)
        if (example !== undefined) media.example = example
      }
    }
  }
  return document
}
