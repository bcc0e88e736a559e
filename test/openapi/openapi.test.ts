import { compileErrors, validate } from '@readme/openapi-parser'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import t from 'tap'
import { build } from '../helpers/build.js'

// Everything here iterates over the document, so routes added later are checked without edits.

interface Media { schema?: Schema, example?: unknown, examples?: unknown }
interface Header { schema?: Schema, description?: string }
interface Schema { $ref?: string, examples?: unknown[], properties?: Record<string, Schema>, [key: string]: unknown }
interface Parameter { in: string, name: string, required?: boolean, schema?: Schema, description?: string }
interface Operation {
  operationId?: string
  tags?: string[]
  summary?: string
  description?: string
  security?: Array<Record<string, string[]>>
  parameters?: Parameter[]
  requestBody?: { content?: Record<string, Media> }
  responses: Record<string, { description?: string, content?: Record<string, Media>, headers?: Record<string, Header> }>
}
interface Document {
  openapi: string
  info: { version: string, contact?: object, license?: { name: string } }
  servers?: Array<{ url: string }>
  security?: unknown
  tags?: Array<{ name: string, description?: string }>
  paths: Record<string, Record<string, Operation>>
  components: { schemas: Record<string, Schema>, securitySchemes?: Record<string, unknown> }
}

const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'])
const ERROR_REF = '#/components/schemas/ErrorBody'
const BEARER = [{ bearerAuth: [] }]
const user = (role: string): Record<string, string> => ({ 'x-test-user': JSON.stringify({ sub: `probe-${role}`, role, email: 'probe@example.com' }) })

function operationsOf (document: Document): Array<{ method: string, path: string, operation: Operation }> {
  return Object.entries(document.paths).flatMap(([path, item]) => Object.entries(item)
    .filter(([method]) => HTTP_METHODS.has(method))
    .map(([method, operation]) => ({ method, path, operation })))
}

/** A concrete URL for a templated path: each `{param}` gets its schema's example, or 1. */
function concreteUrl (path: string, operation: Operation): string {
  return path.replace(/\{([^}]+)\}/g, (_match, name: string) => {
    const parameter = operation.parameters?.find((p) => p.in === 'path' && p.name === name)
    const example = parameter?.schema?.examples?.[0]
    return encodeURIComponent(String(example ?? 1))
  })
}

/** Every object under `value` that looks like an inlined copy of the Error schema. */
function inlinedErrors (value: unknown, at = ''): string[] {
  if (typeof value !== 'object' || value === null) return []
  const found: string[] = []
  const props = (value as Schema).properties
  if (props !== undefined && 'error' in props && (value as Schema).$ref === undefined) found.push(at)
  for (const [key, child] of Object.entries(value)) found.push(...inlinedErrors(child, `${at}/${key}`))
  return found
}

const pointerPart = (part: string): string => part.replace(/~/g, '~0').replace(/\//g, '~1')

/** Every example in the document with the JSON pointer of the schema it illustrates. */
function examplesOf (document: Document): Array<{ pointer: string, example: unknown }> {
  const found: Array<{ pointer: string, example: unknown }> = []
  const ofSchema = (pointer: string, schema: Schema | undefined): void => {
    for (const example of schema?.examples ?? []) found.push({ pointer, example })
    for (const [name, property] of Object.entries(schema?.properties ?? {})) ofSchema(`${pointer}/properties/${pointerPart(name)}`, property)
  }
  const ofMedia = (pointer: string, media: Media): void => {
    if (media.example !== undefined) found.push({ pointer: `${pointer}/schema`, example: media.example })
    ofSchema(`${pointer}/schema`, media.schema)
  }
  for (const [name, schema] of Object.entries(document.components.schemas)) ofSchema(`/components/schemas/${pointerPart(name)}`, schema)
  for (const { method, path, operation } of operationsOf(document)) {
    const at = `/paths/${pointerPart(path)}/${method}`
    operation.parameters?.forEach((parameter, i) => { ofSchema(`${at}/parameters/${i}/schema`, parameter.schema) })
    for (const [type, media] of Object.entries(operation.requestBody?.content ?? {})) ofMedia(`${at}/requestBody/content/${pointerPart(type)}`, media)
    for (const [status, response] of Object.entries(operation.responses)) {
      for (const [type, media] of Object.entries(response.content ?? {})) ofMedia(`${at}/responses/${status}/content/${pointerPart(type)}`, media)
      for (const [name, header] of Object.entries(response.headers ?? {})) ofSchema(`${at}/responses/${status}/headers/${pointerPart(name)}/schema`, header.schema)
    }
  }
  return found
}

function hasExample (media: Media, document: Document): boolean {
  if (media.example !== undefined || media.examples !== undefined) return true
  let schema = media.schema
  if (schema?.$ref !== undefined) schema = document.components.schemas[schema.$ref.split('/').pop() ?? '']
  if (schema === undefined) return false
  if (schema.examples !== undefined) return true
  const properties = Object.values(schema.properties ?? {})
  return properties.length > 0 && properties.every((p) => p.examples !== undefined || p.$ref !== undefined)
}

t.test('the OpenAPI document', async (t) => {
  // A weather key is configured so that the weather router reaches its authentication hook.
  const app = await build(t, { testAuth: true, config: { weatherApiKey: 'test-key', weatherApiUrl: 'http://127.0.0.1:9/weather' } })

  const res = await app.inject('/api-docs/json')
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^application\/json/)
  const document = res.json<Document>()
  const operations = operationsOf(document)

  t.test('is a valid OpenAPI 3 document', async (t) => {
    t.match(document.openapi, /^3\./)
    // validate() dereferences its argument in place, so it gets its own copy.
    const result = await validate(JSON.parse(res.body) as Parameters<typeof validate>[0])
    t.ok(result.valid, result.valid ? 'valid' : compileErrors(result))
    t.same(result.warnings, [], 'no warnings')

    // The validator is not a rubber stamp: a dangling $ref is refused.
    const broken = JSON.parse(res.body) as Document
    broken.components.schemas.Message = { $ref: '#/components/schemas/Missing' }
    t.notOk((await validate(broken as unknown as Parameters<typeof validate>[0])).valid, 'a broken copy is rejected')
  })

  t.test('declares the bearer scheme, the tags and the shared components', async (t) => {
    t.match(document.components.securitySchemes?.bearerAuth, { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' })
    t.equal(document.security, undefined, 'no document-wide security: each operation says its own')
    const named = ['ErrorBody', 'Message', 'Author', 'MessagePage', 'NewMessage', 'MessageChanges', 'User', 'UserPage', 'Movie', 'MoviePage', 'Pagination', 'Health', 'Hello']
    for (const name of named) t.ok(document.components.schemas[name], `component ${name}`)
    t.notOk(document.components.schemas.Error, 'no component shadows the global Error of generated TypeScript')
    t.match(document.info, { version: '2.0.0', contact: { name: String }, license: { name: 'MIT' } })
    t.ok((document.servers ?? []).length > 0, 'servers')
    const ids = operations.map(({ operation }) => operation.operationId)
    t.same(ids.filter((id) => id === undefined || !/^[a-z][A-Za-z]+$/.test(id)), [], 'every operationId is present and camelCase')
    t.equal(new Set(ids).size, ids.length, 'operationIds are unique')
    t.same(Object.keys(document.components.schemas).filter((n) => n.startsWith('def-')), [], 'components are named by $id')
    for (const tag of document.tags ?? []) t.ok(tag.description, `tag ${tag.name} has a description`)
    t.same(Object.keys(document.paths).filter((p) => p.startsWith('/api-docs')), [], 'Swagger UI routes are hidden')
    t.same(Object.keys(document.paths).filter((p) => p.length > 1 && p.endsWith('/')), [], 'canonical paths, no trailing slash')
    t.same(inlinedErrors(document.paths), [], 'the Error schema is referenced, never inlined')
    t.ok(operations.length > 0)
  })

  const declaredTags = new Set((document.tags ?? []).map((tag) => tag.name))
  let protectedCount = 0
  let publicCount = 0

  for (const { method, path, operation } of operations) {
    t.test(`${method.toUpperCase()} ${path}`, async (t) => {
      t.ok(operation.tags !== undefined && operation.tags.length > 0, 'has tags')
      for (const tag of operation.tags ?? []) t.ok(declaredTags.has(tag), `tag ${tag} is declared with a description`)
      t.ok(typeof operation.summary === 'string' && operation.summary.length > 0, 'has a summary')
      t.ok(typeof operation.description === 'string' && operation.description.length > 0, 'has a description')

      // What the service-wide plugins answer (src/openapi/document.ts), on every operation but the probes.
      const probe = path.startsWith('/health')
      t.ok(operation.responses['500'], 'documents 500')
      // Node's HTTP server answers these on any path, before routing (Portman's contract tests met both).
      for (const status of ['400', '431']) t.ok(operation.responses[status], `documents ${status}`)
      if (!probe) {
        for (const status of ['429', '503']) t.ok(operation.responses[status]?.headers?.['Retry-After'], `documents ${status} with Retry-After`)
        for (const [status, response] of Object.entries(operation.responses)) {
          t.ok(response.headers?.['X-RateLimit-Remaining'], `${status} documents the rate-limit headers`)
        }
      }
      if (operation.requestBody !== undefined) for (const status of ['413', '415']) t.ok(operation.responses[status], `body: documents ${status}`)
      if (operation.responses['304'] !== undefined) {
        for (const status of ['200', '304']) t.ok(operation.responses[status]?.headers?.ETag, `conditional: ${status} documents ETag`)
      }
      for (const parameter of operation.parameters ?? []) {
        if (parameter.name === 'page' || parameter.name === 'limit') {
          t.match(parameter.schema, { anyOf: [{ type: 'string' }, { type: 'integer', minimum: 1 }] }, `${parameter.name}: a number or any text`)
        }
        if (parameter.name === 'sort' || parameter.name === 'order') t.ok(Array.isArray(parameter.schema?.enum), `${parameter.name}: its allowlist is an enum`)
        // A documented length must fit a request under Node's 16 KiB limit on its line and headers.
        if (parameter.schema?.maxLength !== undefined) t.ok(Number(parameter.schema.maxLength) <= 8192, `${parameter.name}: maxLength ${String(parameter.schema.maxLength)} fits a request`)
      }

      const statuses = Object.keys(operation.responses)
      t.ok(statuses.some((s) => s.startsWith('2')), 'documents a 2xx response')
      for (const status of statuses) {
        const response = operation.responses[status]!
        t.ok(response.description !== undefined && response.description !== 'Default Response', `${status} is described`)
        // Every error is ErrorBody, the HTTP server's own refusals (400, 431) included.
        if (/^[45]/.test(status)) {
          t.equal(response.content?.['application/json']?.schema?.$ref, ERROR_REF, `${status} refers to the shared ErrorBody schema`)
        }
      }

      // Path parameters and the template agree, both ways.
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1])
      const pathParameters = (operation.parameters ?? []).filter((p) => p.in === 'path')
      t.same(pathParameters.map((p) => p.name).sort(), [...templated].sort(), 'path parameters match the template')
      for (const parameter of operation.parameters ?? []) {
        t.ok(parameter.schema, `parameter ${parameter.name} has a schema`)
        if (parameter.in === 'path') t.equal(parameter.required, true, `path parameter ${parameter.name} is required`)
      }

      for (const [type, media] of Object.entries(operation.requestBody?.content ?? {})) {
        t.ok(hasExample(media, document), `request body ${type} has an example`)
      }
      const success = Object.entries(operation.responses).find(([status]) => status.startsWith('2'))![1]
      if (success.content !== undefined) t.ok(success.content['application/json']?.example !== undefined, 'the success response has an example')

      // The source of truth for "protected" is the running route, not the document: without
      // credentials, the authentication hook answers 401 before parsing or validation.
      const url = concreteUrl(path, operation)
      const anonymous = await app.inject({ method: method.toUpperCase() as 'GET', url })
      if (anonymous.statusCode === 401) {
        protectedCount++
        t.same(operation.security, BEARER, 'protected: security is bearerAuth')
        t.ok(operation.responses['401'], 'protected: documents 401')
        // The lowest role: a role gate (preValidation) or a handler-level refusal answers 403.
        const lowest = await app.inject({ method: method.toUpperCase() as 'GET', url, headers: user('User') })
        if (lowest.statusCode === 403) t.ok(operation.responses['403'], 'refuses the lowest role: documents 403')
      } else {
        publicCount++
        t.same(operation.security, [], 'public: an empty security requirement')
        t.notOk(operation.responses['401'], 'public: no 401')
      }
    })
  }

  t.test('every example matches its own schema', async (t) => {
    const ajv = new Ajv2020({ strict: false, allErrors: true })
    addFormats.default(ajv)
    ajv.addSchema({ ...document, $id: 'http://localhost/openapi.json' } as object)
    const check = (pointer: string, example: unknown): boolean => ajv.validate({ $ref: `http://localhost/openapi.json#${pointer}` }, example)
    const examples = examplesOf(document)
    t.ok(examples.length > 50, `${examples.length} examples`)
    for (const { pointer, example } of examples) t.ok(check(pointer, example), `${pointer}: ${ajv.errorsText()}`)
    // Not a rubber stamp: an example of the wrong shape is refused.
    t.notOk(check('/components/schemas/Message', { id: 'forty-two' }), 'a wrong Message is refused')
  })

  t.test('the probe saw both kinds of operation', async (t) => {
    t.ok(protectedCount > 0, `${protectedCount} protected`)
    t.ok(publicCount > 0, `${publicCount} public`)
  })

  // SPEC 4.1 and 4.6, as fixed points for the generic checks above.
  t.test('SPEC 4.1 operations', async (t) => {
    const op = (method: string, path: string): Operation | undefined => document.paths[path]?.[method]
    for (const [method, path] of [['get', '/health'], ['get', '/v2/messages'], ['post', '/v2/input/users'], ['get', '/v2/input/users/{id}']] as const) {
      t.ok(op(method, path), `${method} ${path} documented`)
      t.same(op(method, path)?.security, [], `${method} ${path} is public`)
    }
    t.same(op('post', '/v2/messages')?.security, BEARER)
    t.ok(op('post', '/v2/messages')?.responses['401'])
    t.same(op('get', '/v2/hello')?.security, BEARER)
    t.ok(op('get', '/v2/hello')?.responses['401'])
    t.ok(op('get', '/v2/hello')?.responses['403'])
    t.equal(op('get', '/v2/hello')?.parameters, undefined, 'GET /v2/hello takes no parameters')
  })
})

t.test('Swagger UI is served at /api-docs', async (t) => {
  const app = await build(t, { testAuth: true })
  const page = await app.inject('/api-docs')
  t.equal(page.statusCode, 200)
  t.match(page.headers['content-type'], /^text\/html/)
  t.match(page.body, /swagger-ui-bundle\.js/)
  t.notMatch(page.body, /<script>|<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script')
  const initializer = await app.inject('/api-docs/static/swagger-initializer.js')
  t.equal(initializer.statusCode, 200)
  t.match(initializer.body, /"persistAuthorization":true/)
  t.match(initializer.headers['content-security-policy'], /script-src 'self'/)
})

t.test('security headers on every kind of response', async (t) => {
  const app = await build(t, { testAuth: true })
  const cases = [
    { name: 'GET /health', request: { method: 'GET' as const, url: '/health' }, status: 200 },
    { name: 'GET /api-docs', request: { method: 'GET' as const, url: '/api-docs' }, status: 200 },
    { name: 'unknown route', request: { method: 'GET' as const, url: '/no-such-route' }, status: 404 },
    { name: 'no token', request: { method: 'GET' as const, url: '/v2/hello' }, status: 401 },
    { name: 'role gate', request: { method: 'GET' as const, url: '/v2/hello', headers: user('User') }, status: 403 },
    { name: 'validation', request: { method: 'POST' as const, url: '/v2/input/users', payload: {} }, status: 400 },
    { name: 'bad id', request: { method: 'GET' as const, url: '/v2/input/users/abc' }, status: 400 }
  ]
  for (const { name, request, status } of cases) {
    const res = await app.inject(request)
    t.equal(res.statusCode, status, name)
    const csp = String(res.headers['content-security-policy'])
    t.match(csp, /default-src 'self'/, `${name}: CSP`)
    t.match(csp, /script-src 'self'(;|$)/, `${name}: scripts from 'self' only`)
    t.match(csp, /frame-ancestors 'none'/, `${name}: no framing`)
    t.notMatch(csp, /unsafe-inline|unsafe-eval/, `${name}: nothing unsafe`)
    t.equal(res.headers['x-content-type-options'], 'nosniff', `${name}: nosniff`)
    t.equal(res.headers['x-frame-options'], 'DENY', `${name}: x-frame-options`)
    t.equal(res.headers['referrer-policy'], 'no-referrer', `${name}: referrer-policy`)
    t.ok(res.headers['strict-transport-security'], `${name}: HSTS`)
    t.notOk(res.headers['x-powered-by'], `${name}: no x-powered-by`)
    if (status >= 400) t.match(res.json(), { error: String }, `${name}: JSON error body`)
  }
})
