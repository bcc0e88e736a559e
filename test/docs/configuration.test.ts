import t from 'tap'
import { EnvSchema } from '../../src/config.js'
import { readDocument, tableRows } from '../helpers/markdown.js'

// docs/configuration.md lists every variable src/config.ts accepts, once, and nothing else, with the
// schema's default where the schema has one.

const rows = tableRows(readDocument('docs/configuration.md'))
  .map((cells) => ({ name: /^`([A-Z][A-Z\d_]*)`$/.exec(cells[0] ?? '')?.[1], cells }))
  .filter((row): row is { name: string, cells: string[] } => row.name !== undefined)

t.test('the table lists exactly the variables src/config.ts accepts', async (t) => {
  const accepted = Object.keys(EnvSchema.properties).sort()
  const listed = rows.map((row) => row.name)
  t.ok(accepted.length > 40, `${accepted.length} variables accepted`)
  t.same(listed.filter((name, i) => listed.indexOf(name) !== i), [], 'no variable listed twice')
  t.same(accepted.filter((name) => !listed.includes(name)), [], 'every accepted variable is listed')
  t.same(listed.filter((name) => !accepted.includes(name)), [], 'every listed variable is accepted')
})

t.test('every row has a default, a range and a meaning, and the schema\'s default where it has one', async (t) => {
  const properties = EnvSchema.properties as Record<string, { default?: unknown }>
  for (const { name, cells } of rows) {
    t.equal(cells.length, 4, `${name}: variable, default, range, meaning`)
    t.ok(cells.slice(1).every((cell) => cell.length > 0), `${name}: no empty cell`)
    const schemaDefault = properties[name]?.default
    if (schemaDefault !== undefined) t.match(cells[1], `\`${String(schemaDefault)}\``, `${name}: the default is ${String(schemaDefault)}`)
  }
})
