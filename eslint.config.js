import neostandard from 'neostandard'

export default [
  ...neostandard({ ts: true, ignores: ['dist', 'drizzle', 'coverage', '.tap', 'scratch', 'test-artifacts'] }),
  {
    // TypeBox idiom: a schema constant and its Static type share one name.
    rules: { '@typescript-eslint/no-redeclare': 'off' }
  }
]
