import { readFile } from 'node:fs/promises'
import { sql } from 'drizzle-orm'
import t, { type Test } from 'tap'
import { createDb, DEFAULT_DATA_DIR, MIGRATIONS_FOLDER, type Database, type DbHandle } from '../../src/db/client.js'
import { movies } from '../../src/db/schema.js'
import { createUsersRepository } from '../../src/users/repository.js'
import { freshDatabase } from '../helpers/database.js'
import { queryRows } from '../helpers/fixtures.js'

const onPostgres = (process.env.TEST_DATABASE_URL ?? '') !== ''

/** The `when` of every migration in drizzle/meta/_journal.json, which the migrator records as created_at. */
async function journal (): Promise<number[]> {
  const text = await readFile(`${MIGRATIONS_FOLDER}/meta/_journal.json`, 'utf8')
  return (JSON.parse(text) as { entries: Array<{ when: number }> }).entries.map((e) => e.when)
}

async function checkMigrated (t: Test, db: Database, label: string): Promise<void> {
  t.equal(await db.$count(movies), 54, `${label}: the movies table holds exactly the 54 seeded rows`)
  const applied = await queryRows<{ created_at: unknown }>(db, sql`select created_at from drizzle.__drizzle_migrations order by id`)
  const expected = await journal()
  t.ok(expected.length >= 2, `${label}: the journal holds the schema and the movie seed, at least`)
  t.equal(applied.length, expected.length, `${label}: the drizzle migrations table lists each migration once (${expected.length})`)
  t.same(applied.map((row) => Number(row.created_at)), expected, `${label}: one per journal entry, in order`)
}

t.test('migrations are idempotent, and safe when several instances start at once', async (t) => {
  const database = await freshDatabase()
  const handles: DbHandle[] = []
  t.teardown(async () => {
    for (const handle of handles) await handle.close()
    await database.drop()
  })

  if (onPostgres) {
    // Three instances starting together on one fresh database: without the advisory lock they
    // race on CREATE TYPE / CREATE TABLE, or seed the movies more than once.
    for (let i = 0; i < 3; i++) handles.push(await createDb({ url: database.url }))
    t.equal(handles[0]!.driver, 'postgres')
    const results = await Promise.allSettled(handles.map((handle) => handle.migrate()))
    t.same(results.map((r) => r.status), ['fulfilled', 'fulfilled', 'fulfilled'], 'three concurrent migrate() calls all succeed')
    await checkMigrated(t, handles[0]!.db, 'after the concurrent runs')
    await handles[1]!.migrate()
    await checkMigrated(t, handles[2]!.db, 'after one more run, seen from another handle')
  } else {
    // PGlite is one embedded database per handle: "twice" means twice on the same handle.
    handles.push(await createDb({ url: database.url }))
    t.equal(handles[0]!.driver, 'pglite')
    await handles[0]!.migrate()
    await checkMigrated(t, handles[0]!.db, 'after the first run')
    await handles[0]!.migrate()
    await checkMigrated(t, handles[0]!.db, 'after the second run')
  }
})

t.test('the embedded default (no DATABASE_URL) persists in its data directory', async (t) => {
  t.equal(DEFAULT_DATA_DIR, '.data/pglite', 'CONTRACT 2: by default under ./.data/')
  const dataDir = t.testdir()

  const first = await createDb({ url: undefined, dataDir })
  t.equal(first.driver, 'pglite')
  let alice
  try {
    await first.migrate()
    alice = await createUsersRepository(first.db).upsert({ subjectId: 'alice', email: 'alice@example.com', name: 'Alice', role: 'Admin' })
    t.match(alice, { id: 1, subjectId: 'alice', email: 'alice@example.com', name: 'Alice', role: 'Admin', createdAt: String, updatedAt: String })
  } finally {
    await first.close()
  }

  const second = await createDb({ url: undefined, dataDir })
  t.teardown(() => second.close())
  t.same(await createUsersRepository(second.db).findBySubject('alice'), alice, 'reopened: the user is still there, unchanged')
  await second.migrate()
  await checkMigrated(t, second.db, 'reopened and migrated again')
})

t.test('createDb refuses an unknown scheme', async (t) => {
  await t.rejects(createDb({ url: 'mysql://x' }), { message: 'DATABASE_URL must start with postgres://, postgresql:// or memory://' })
})
