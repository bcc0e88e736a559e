import closeWithGrace from 'close-with-grace'
import { buildApp } from './app.js'
import { ConfigError, loadConfig, type AppConfig } from './config.js'

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

const config = configOrExit()
const app = await buildApp(config)

closeWithGrace({ delay: 10_000 }, async function ({ signal, err }) {
  if (err !== undefined) app.log.error({ err }, 'closing after an error')
  else app.log.info({ signal }, 'closing')
  await app.close()
})

await app.listen({ port: config.port, host: config.host })
