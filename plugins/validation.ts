// validation: the Ajv compilers that check request bodies, params, querystrings and headers.
import { Ajv, type Options } from 'ajv'
import fp from 'fastify-plugin'

// allErrors reports every failing field at once (SPEC 7.3); it is safe because every schema is bounded.
// verbose gives the error formatter the failing schema and value, so details name the rule broken.
const common: Options = { allErrors: true, verbose: true, useDefaults: true, removeAdditional: false, strict: false }

export default fp(async function validation (app) {
  // A JSON body is never coerced: 123 is not a string. Params and queries arrive as text and are.
  const body = new Ajv({ ...common, coerceTypes: false })
  const text = new Ajv({ ...common, coerceTypes: true })
  // Routes refer to the shared schemas (addSchema) by $id: each compiler learns them as routes are built.
  const known = new Set<string>()
  function withShared (): void {
    for (const shared of Object.values(app.getSchemas()) as Array<{ $id?: string }>) {
      if (shared.$id === undefined || known.has(shared.$id)) continue
      known.add(shared.$id)
      body.addSchema(shared)
      text.addSchema(shared)
    }
  }
  app.setValidatorCompiler(({ schema, httpPart }) => {
    withShared()
    return (httpPart === 'body' ? body : text).compile(schema)
  })
}, { name: 'validation', fastify: '5.x' })
