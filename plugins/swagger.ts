// swagger: the OpenAPI document built from the routes' own schemas, and Swagger UI at /api-docs.
import { STATUS_CODES } from 'node:http'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import fp from 'fastify-plugin'

export interface SwaggerPluginOptions {
  title: string
  version: string
  description?: string
  /** Where Swagger UI is served; the document is at `<routePrefix>/json` (default /api-docs). */
  routePrefix?: string
}

const DESCRIPTION = [
  'JSON API for messages and local user records.',
  '',
  'Protected operations (shown locked) need `Authorization: Bearer <access token>`: an RS256 JWT from the',
  'identity provider for this API\'s audience. Locally, mint one with `npm run token -- --sub alice --role Admin`',
  'and paste it under **Authorize**. Every error body has the shape of the `Error` schema.'
].join('\n')

const TAGS = [
  { name: 'health', description: 'Liveness and readiness probes' },
  { name: 'messages', description: 'Messages: public reading, authenticated writing' },
  { name: 'users', description: 'Local user records, provisioned on a subject\'s first authenticated request' },
  { name: 'hello', description: 'A greeting for callers ranked Admin or higher' },
  { name: 'input', description: 'Routes that demonstrate the request validation rules' },
  { name: 'movies', description: 'The reference collection: pagination, filtering and sorting' },
  { name: 'weather', description: 'Proxy to the upstream weather service' }
]

// Used where a route gives a response no description of its own (CONTRACT 8 / SPEC 7.2 wording).
const RESPONSE_DESCRIPTIONS: Record<string, string> = {
  400: 'Validation failed, or a malformed request',
  401: 'Invalid or missing token',
  403: 'Insufficient permissions',
  404: 'Not found',
  413: 'Request body too large',
  415: 'Unsupported media type',
  429: 'Too many requests',
  500: 'Internal server error',
  502: 'An upstream service failed or could not be reached',
  503: 'Service unavailable',
  '3XX': 'Redirection',
  '4XX': 'Client error',
  '5XX': 'Server error'
}

const ERROR_REF = '#/components/schemas/Error'

interface Media { schema?: { $ref?: string }, example?: unknown, examples?: unknown }
interface Operation { responses?: Record<string, { description?: string, content?: Record<string, Media> }> }

/**
 * Every response gets a description, and every error response other than 400 an example of its
 * own: the Error schema's single example is a validation failure, which would mislead on a 401.
 */
function documentResponses<T extends object> (document: T): T {
  const paths = (document as { paths?: Record<string, Record<string, Operation>> }).paths ?? {}
  for (const pathItem of Object.values(paths)) {
    for (const operation of Object.values(pathItem)) {
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        if (response.description === 'Default Response') {
          response.description = RESPONSE_DESCRIPTIONS[status] ?? STATUS_CODES[status] ?? 'Response'
        }
        const media = response.content?.['application/json']
        if (status !== '400' && media?.schema?.$ref === ERROR_REF && media.example === undefined && media.examples === undefined) {
          media.example = { error: response.description }
        }
      }
    }
  }
  return document
}

export default fp<SwaggerPluginOptions>(async function swaggerPlugin (app, opts) {
  const routePrefix = opts.routePrefix ?? '/api-docs'

  await app.register(swagger, {
    // 3.1: the schemas are JSON Schema 2020-12, so TypeBox's nullable unions and `examples` stay valid.
    openapi: {
      openapi: '3.1.0',
      info: { title: opts.title, version: opts.version, description: opts.description ?? DESCRIPTION },
      tags: TAGS,
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'RS256 access token for this API\'s audience' }
        }
      }
    },
    // Shared schemas keep their $id as the component name: #/components/schemas/Error, not def-0.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => typeof json.$id === 'string' ? json.$id : `def-${i}` },
    // A prefixed '/' route answers on /v2/messages and /v2/messages/; document the first, the canonical one.
    transform: ({ schema, url }) => ({ schema, url: url.length > 1 ? url.replace(/\/+$/, '') : url }),
    transformObject: (document) => 'openapiObject' in document ? documentResponses(document.openapiObject) : document.swaggerObject
  })

  await app.register(swaggerUi, {
    routePrefix,
    uiConfig: {
      // No top bar: it only offers to explore other documents, and its logo SVG carries an inline
      // <style> that the service's CSP (no 'unsafe-inline') would block.
      layout: 'BaseLayout',
      docExpansion: 'list',
      deepLinking: true,
      // Tags keep the order of the document's tag list; operations are sorted by path, then method.
      operationsSorter: 'alpha',
      persistAuthorization: true,
      displayRequestDuration: true,
      tryItOutEnabled: false
    },
    // The UI page loads only same-origin scripts and styles (no inline script), so the service-wide
    // helmet policy already fits it; staticCSP would replace that policy with a looser one.
    staticCSP: false
  })
}, { name: 'swagger', fastify: '5.x' })
