import { spawn, type ChildProcess } from 'node:child_process'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import postgres from 'postgres'
import type { Test } from 'tap'
import { copyPgliteTemplate, freshDatabase } from './database.js'
import { PgliteThread } from '../../src/db/pglite-thread.js'

const SERVER = fileURLToPath(new URL('../../src/server.ts', import.meta.url))
// The child loads TypeScript exactly as this test process does (the runner's loader, by absolute
// URL, so any working directory will do): coverage of both then describes the same code and merges.
// Its settings travel in variables; the project's tsconfig is named, since a child in a temporary
// directory would not find it and would compile with other options.
export const LOADER_ARGS = process.execArgv
export const LOADER_ENV: Record<string, string> = {
  ...Object.fromEntries(Object.entries(process.env).filter((entry): entry is [string, string] =>
    /^TSX_/.test(entry[0]) && entry[1] !== undefined)),
  TSX_TSCONFIG_PATH: fileURLToPath(new URL('../../tsconfig.json', import.meta.url))
}

export interface ServerProcess {
  url: string
  child: ChildProcess
  /** Every stdout line the server wrote so far (JSON logs). */
  lines: string[]
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
}

/**
 * A database a real server process can use and the test can count in afterwards: a fresh
 * PostgreSQL database when TEST_DATABASE_URL is set, else a PGlite data directory on disk
 * (the server runs with that directory's parent as cwd, so its default ./.data/pglite lands there).
 */
export interface ProcessDatabase {
  env: Record<string, string>
  cwd: string
  /** Runs one SQL query; for PGlite only while no server holds the directory. */
  query: <T extends Record<string, unknown>>(text: string) => Promise<T[]>
}

export async function processDatabase (t: Test): Promise<ProcessDatabase> {
  const cwd = await mkdtemp(join(tmpdir(), 'messages-api-'))
  t.teardown(async () => { await rm(cwd, { recursive: true, force: true }) })
  if (process.env.TEST_DATABASE_URL !== undefined && process.env.TEST_DATABASE_URL !== '') {
    const db = await freshDatabase()
    const sql = postgres(db.url, { max: 1, onnotice: () => {} })
    t.teardown(async () => { await sql.end(); await db.drop() })
    return { env: { DATABASE_URL: db.url }, cwd, query: async <T extends Record<string, unknown>>(text: string) => await sql.unsafe(text) as unknown as T[] }
  }
  // The server opens the migrated template's copy where it keeps its data, instead of creating one.
  const dataDir = join(cwd, '.data/pglite')
  await mkdir(dataDir, { recursive: true })
  await copyPgliteTemplate(dataDir)
  return {
    env: {},
    cwd,
    async query<T extends Record<string, unknown>> (text: string): Promise<T[]> {
      // Opened as the service opens it (src/db/pglite-thread.ts), so the extensions are the same.
      const pg = await PgliteThread.create({ dataDir })
      try {
        return (await pg.query<T>(text)).rows
      } finally {
        await pg.close()
      }
    }
  }
}

/** Spawns `node src/server.ts` (with the test's own loader) on 127.0.0.1 with an ephemeral port; killed at teardown. */
export async function startServer (t: Test, env: Record<string, string>, cwd: string): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...LOADER_ARGS, SERVER], {
    cwd,
    env: { ...LOADER_ENV, PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', RATE_LIMIT_MAX: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const lines: string[] = []
  let stderr = ''
  const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => { resolve({ code, signal }) })
  })
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
  const url = await new Promise<string>((resolve, reject) => {
    let buffer = ''
    const timer = setTimeout(() => { reject(new Error(`server did not start: ${stderr}`)) }, 90_000)
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      buffer += chunk
      let index
      while ((index = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, index)
        buffer = buffer.slice(index + 1)
        lines.push(line)
        const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(line)
        // Without AUTH_ISSUER the local identity provider also announces itself: not the API.
        if (match?.[1] !== undefined && !line.includes('"component":"dev-idp"')) {
          clearTimeout(timer)
          resolve(match[1])
        }
      }
    })
    exited.then(({ code }) => { clearTimeout(timer); reject(new Error(`server exited ${String(code)}: ${stderr}`)) }).catch(reject)
  })
  return { url, child, lines, exited }
}
