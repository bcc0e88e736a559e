/** Where the benchmark reads and writes. */
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { DEFAULT_DATA_DIR } from '../../src/db/client.js'
import { DEFAULT_KEYS_DIR } from '../../src/dev-idp/app.js'

// Paths hang off the project root, so the benchmark works from any working directory.
export const ROOT = fileURLToPath(new URL('../..', import.meta.url))
// A run's files: its results, the servers' logs. Only the summaries the docs cite are committed (bench/README.md).
export const RESULTS_DIR = join(ROOT, 'bench', 'results')
export const KEYS_DIR = join(ROOT, DEFAULT_KEYS_DIR)
// The embedded run's own directory, apart from the ./.data/pglite that `npm start` uses: the service runs
// with it as its working directory, so its default data directory is the one seeded here. The oracle
// (bench/checks/reference-sql.ts) reads a copy of it taken before the service starts.
export const EMBEDDED_DIR = join(ROOT, '.data', 'bench')
export const EMBEDDED_DATA_DIR = join(EMBEDDED_DIR, DEFAULT_DATA_DIR)
export const EMBEDDED_ORACLE_DIR = join(EMBEDDED_DIR, 'oracle')

// The Platformatic DB peer (bench/platformatic/): its own package and lock file, installed only by
// `npm run bench:peer`, never by the project's `npm ci`.
export const PEER_DIR = join(ROOT, 'bench', 'platformatic')
export const PEER_ENTRY = join(PEER_DIR, 'serve.mjs')
export const PEER_ENTRY_INSTALLED = join(PEER_DIR, 'node_modules', '@platformatic', 'db', 'package.json')
