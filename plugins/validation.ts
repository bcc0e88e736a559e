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
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? body : text).compile(schema))
}, { name: 'validation', fastify: '5.x' })
