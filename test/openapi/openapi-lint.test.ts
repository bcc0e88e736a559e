import { createConfig, lintFromString } from '@redocly/openapi-core'
import spectralCore from '@stoplight/spectral-core'
import spectralParsers from '@stoplight/spectral-parsers'
import spectralRulesets from '@stoplight/spectral-rulesets'
import t from 'tap'
import { build } from '../helpers/build.js'

// The linters users run on the document, run here on the document the app serves, offline:
// Spectral's `spectral:oas` and Redocly's `recommended`. Both must find nothing, warnings included.

// The library sends nothing anywhere; the variable turns off the telemetry of Redocly's CLI, should it run.
process.env.REDOCLY_TELEMETRY = 'off'

const app = await build(t)
const source = (await app.inject('/api-docs/json')).body

/** Spectral findings as "rule: message at path", severity 0 (error) to 3 (hint). */
async function spectral (text: string): Promise<string[]> {
  const linter = new spectralCore.Spectral()
  linter.setRuleset({ extends: [[spectralRulesets.oas, 'recommended']] } as never)
  const results = await linter.run(new spectralCore.Document(text, spectralParsers.Json, 'openapi.json'))
  return results.map((r) => `${String(r.code)} (severity ${r.severity}): ${r.message} at ${r.path.join('.')}`)
}

/** Redocly findings as "rule (severity): message at pointer". */
async function redocly (text: string): Promise<string[]> {
  const config = await createConfig({ extends: ['recommended'] })
  const problems = await lintFromString({ source: text, absoluteRef: 'openapi.json', config })
  return problems.map((p) => `${p.ruleId} (${p.severity}): ${p.message} at ${p.location[0]?.pointer ?? ''}`)
}

t.test('Spectral spectral:oas finds nothing', async (t) => {
  t.same(await spectral(source), [])
  // Not a rubber stamp: an operation without an operationId is reported.
  const broken = JSON.parse(source) as { paths: Record<string, Record<string, { operationId?: string }>> }
  delete broken.paths['/v2/messages']!.get!.operationId
  t.match(await spectral(JSON.stringify(broken)), [/^operation-operationId/], 'a missing operationId is found')
})

t.test('Redocly recommended finds nothing', async (t) => {
  t.same(await redocly(source), [])
  const broken = JSON.parse(source) as { servers?: unknown }
  delete broken.servers
  t.match(await redocly(JSON.stringify(broken)), [/^no-empty-servers/], 'a document without servers is found')
})
