import type { Test } from 'tap'
import { buildApp, type App, type BuildOptions } from '../../src/app.js'
import { loadConfig, type AppConfig } from '../../src/config.js'
import { freshDatabase } from './database.js'

/** The configuration every test starts from: no network defaults, no rate limit, no load shedding, quiet logs. */
export function testConfig (over: Partial<AppConfig> = {}): AppConfig {
  return { ...loadConfig({ AUTH_ISSUER: 'http://127.0.0.1:9', RATE_LIMIT_MAX: '0', LOG_LEVEL: 'silent', MAX_EVENT_LOOP_DELAY_MS: '0' }), ...over }
}

export interface BuildTestOptions extends BuildOptions {
  config?: Partial<AppConfig>
}

/** A fresh app on a fresh database, closed (and the database dropped) when the test ends. */
export async function build (t: Test, options: BuildTestOptions = {}): Promise<App> {
  const { config, ...buildOptions } = options
  const database = await freshDatabase()
  const app = await buildApp(testConfig({ databaseUrl: database.dataDir === undefined ? database.url : undefined, ...config }), { logger: false, dataDir: database.dataDir, ...buildOptions })
  t.teardown(async () => {
    await app.close()
    await database.drop()
  })
  return app
}
