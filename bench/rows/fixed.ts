/** The rows whose answer is one fixed body: GET /health, and GET /v2/hello behind an RS256 token. */
import { DEFAULT_TARGETS } from '../report/bench-report.js'
import type { RowBuilder } from './row.js'

export const healthRow: RowBuilder = async ({ wanted }) => {
  if (!wanted('health')) return []
  return [{ key: 'health', name: 'GET /health', targets: DEFAULT_TARGETS, requests: () => [{ method: 'GET', path: '/health' }], verify: (b) => b === '{"ok":true}' ? undefined : `health body ${b.slice(0, 40)}` }]
}

const HELLO = /^\{"message":"Hello, [^"]*!","role":"[^"]+"\}$/

export const helloRow: RowBuilder = async ({ wanted, tokens }) => {
  if (!wanted('hello')) return []
  return [{
    key: 'hello',
    name: 'GET /v2/hello (RS256)',
    targets: DEFAULT_TARGETS,
    requests: () => [{ method: 'GET', path: '/v2/hello', headers: { authorization: `Bearer ${tokens.hello}` } }],
    // A token from a file (--token-file) has claims the benchmark does not know: a greeting of any caller will do.
    verify: (b) => (tokens.helloAnswer === undefined ? HELLO.test(b) : b === tokens.helloAnswer) ? undefined : `hello body ${b.slice(0, 60)}`
  }]
}
