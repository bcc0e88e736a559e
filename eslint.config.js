import neostandard from 'neostandard'

export default [
  // test/client/api.d.ts is generated (npm run openapi:client), exactly as openapi-typescript writes it.
  // bench/platformatic/node_modules is the optional peer's own install (npm run bench:peer).
  ...neostandard({ ts: true, ignores: ['dist', 'drizzle', 'coverage', '.tap', 'scratch', 'test-artifacts', 'test/client/api.d.ts', 'bench/platformatic/node_modules'] }),
  {
    // TypeBox idiom: a schema constant and its Static type share one name.
    rules: { '@typescript-eslint/no-redeclare': 'off' }
  }
]
