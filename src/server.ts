import closeWithGrace from 'close-with-grace'
import type { FastifyInstance } from 'fastify'
import { buildApp, processLoggerOptions, type App } from './app.js'
import { ConfigError, loadConfig, type AppConfig } from './config.js'
import { buildDevIdp } from './dev-idp/app.js'

function configOrExit (): AppConfig {
  try {
    return loadConfig(process.env)
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`Configuration error: ${err.message}\n`)
      process.exit(1)
    }
    throw err
  }
}

// CONTRACT 3: started only when AUTH_ISSUER is unset outside production, and listening before the
// API does, so the first authenticated request already finds its key set.
async function startDevIdpOrExit (config: AppConfig, app: App): Promise<FastifyInstance> {
  const { hostname, port } = new URL(config.authIssuer)
  const idp = await buildDevIdp({
    issuer: config.authIssuer,
    audience: config.apiAudience,
    logger: app.log.child({ component: 'dev-idp' })
  })
  try {
    await idp.listen({ host: hostname, port: Number(port) })
  } catch (err) {
    app.log.fatal({ err, url: config.authIssuer }, `The local development identity provider cannot listen on ${config.authIssuer}; free port ${port} or set AUTH_ISSUER`)
    await idp.close()
    await app.close()
    process.exit(1)
  }
  app.log.warn({ url: config.authIssuer }, `Local development identity provider running at ${config.authIssuer}; it mints tokens for anyone who asks and must not be used in production`)
  return idp
}

const config = configOrExit()
const app = await buildApp(config, { logger: processLoggerOptions(config) })
const devIdp = config.devIdp && !config.production ? await startDevIdpOrExit(config, app) : undefined

// CONTRACT 11: readiness fails and connections drain from the moment the signal arrives; close()
// stops accepting, waits for in-flight requests and closes the pools. Past SHUTDOWN_GRACE_MS
// close-with-grace exits with code 1.
closeWithGrace({ delay: config.shutdownGraceMs }, async function ({ signal, err }) {
  if (err !== undefined) app.log.error({ err }, 'closing after an error')
  else app.log.info({ signal }, 'closing')
  app.drain()
  await app.close()
  await devIdp?.close()
})

await app.listen({ port: config.port, host: config.host })
