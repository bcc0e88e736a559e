// swagger: the OpenAPI document built from the routes' own schemas, and Swagger UI at /api-docs.
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import fp from 'fastify-plugin'
import { documentOperation, finishDocument } from '../src/openapi/document.js'

export interface SwaggerPluginOptions {
  title: string
  version: string
  description?: string
  /** Where Swagger UI is served; the document is at `<routePrefix>/json` (default /api-docs). */
  routePrefix?: string
  /**
   * The development identity provider's sign-in (CONTRACT 3), when it is the one in use: Swagger UI
   * then signs in by itself, with the authorization-code flow and PKCE, as the client `clientId`.
   */
  signIn?: { authorizationUrl: string, tokenUrl: string, clientId: string }
}

const DESCRIPTION = [
  'JSON API for messages and local user records.',
  '',
  'Protected operations (shown locked) need `Authorization: Bearer <access token>`: an RS256 JWT from the',
  'identity provider for this API\'s audience. Locally, mint one with `npm run token -- --sub alice --role Admin`',
  'and paste it under **Authorize**. Every error body has the shape of the `ErrorBody` schema.',
  '',
  'Every operation may also answer 500; every one but the probes 429 (the per-caller rate limit, with',
  '`Retry-After`) and 503 (shed under overload, with `Retry-After`; for writes also while no writable database',
  'primary answers during a failover), and sends the `X-RateLimit-*` headers.'
].join('\n')

const SIGN_IN = 'devSignIn'

const TAGS = [
  { name: 'health', description: 'Liveness and readiness probes' },
  { name: 'messages', description: 'Messages: public reading, authenticated writing' },
  { name: 'users', description: 'Local user records, provisioned on a subject\'s first authenticated request' },
  { name: 'hello', description: 'A greeting for callers ranked Admin or higher' },
  { name: 'input', description: 'Routes that demonstrate the request validation rules' },
  { name: 'movies', description: 'The reference collection: pagination, filtering and sorting' },
  { name: 'weather', description: 'Proxy to the upstream weather service' }
]

export default fp<SwaggerPluginOptions>(async function swaggerPlugin (app, opts) {
  const routePrefix = opts.routePrefix ?? '/api-docs'

  await app.register(swagger, {
    // 3.1: the schemas are JSON Schema 2020-12, so TypeBox's nullable unions and `examples` stay valid.
    openapi: {
      openapi: '3.1.0',
      info: {
        title: opts.title,
        version: opts.version,
        description: opts.description ?? DESCRIPTION,
        contact: { name: 'Messages API maintainers' },
        license: { name: 'MIT', identifier: 'MIT' }
      },
      // Relative: the API is where this document is served, whatever name a deployment gives it.
      servers: [{ url: '/', description: 'The server that serves this document' }],
      tags: TAGS,
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'RS256 access token for this API\'s audience' },
          ...(opts.signIn === undefined
            ? {}
            : {
                [SIGN_IN]: {
                  type: 'oauth2',
                  description: 'Development only: sign in at the local identity provider as any subject and role (authorization code with PKCE).',
                  flows: { authorizationCode: { authorizationUrl: opts.signIn.authorizationUrl, tokenUrl: opts.signIn.tokenUrl, scopes: {} } }
                }
              })
        }
      }
    },
    // Shared schemas keep their $id as the component name: #/components/schemas/ErrorBody, not def-0.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => typeof json.$id === 'string' ? json.$id : `def-${i}` },
    // A prefixed '/' route answers on /v2/messages and /v2/messages/; document the first, the canonical one.
    transform: ({ schema, url, route }) => ({ schema: documentOperation(schema, route, { alsoSignIn: opts.signIn === undefined ? undefined : SIGN_IN }), url: url.length > 1 ? url.replace(/\/+$/, '') : url }),
    transformObject: (document) => 'openapiObject' in document ? finishDocument(document.openapiObject) : document.swaggerObject
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
    ...(opts.signIn === undefined ? {} : { initOAuth: { clientId: opts.signIn.clientId, usePkceWithAuthorizationCodeGrant: true } }),
    // The UI page loads only same-origin scripts and styles (no inline script), so the service-wide
    // helmet policy already fits it; staticCSP would replace that policy with a looser one.
    staticCSP: false
  })
}, { name: 'swagger', fastify: '5.x' })
