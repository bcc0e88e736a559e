import { ConfigError, loadConfig } from '../config.js'
import { createDb } from './client.js'

// `npm run db:migrate`: apply drizzle/ to DATABASE_URL (or the embedded default) and exit.
try {
  const config = loadConfig(process.env)
  const handle = await createDb({ url: config.databaseUrl })
  try {
    await handle.migrate()
  } finally {
    await handle.close()
  }
  process.stdout.write(`migrations applied (${handle.driver})\n`)
} catch (err) {
  process.stderr.write(`${err instanceof ConfigError ? 'Configuration error' : 'Migration failed'}: ${(err as Error).message}\n`)
  process.exit(1)
}
