import { randomBytes } from 'node:crypto'
import postgres from 'postgres'

/**
 * A database of its own for one app under test: in-memory PGlite, or, when TEST_DATABASE_URL is
 * set, a fresh database on that server that `drop` removes again.
 */
export async function freshDatabase (): Promise<{ url: string, drop: () => Promise<void> }> {
  const server = process.env.TEST_DATABASE_URL
  if (server === undefined || server === '') return { url: 'memory://', drop: async () => {} }
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
