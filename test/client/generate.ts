// Writes test/client/api.d.ts: the TypeScript types openapi-typescript generates from the OpenAPI
// document the service serves. test/openapi/openapi-client.test.ts fails while the committed file differs from
// what the current document generates: run `npm run openapi:client` after changing a route's schema.
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { generateClientTypes, servedDocument } from '../helpers/openapi.js'

const target = fileURLToPath(new URL('./api.d.ts', import.meta.url))
writeFileSync(target, await generateClientTypes(await servedDocument()))
process.stdout.write(`openapi:client: wrote ${target}\n`)
