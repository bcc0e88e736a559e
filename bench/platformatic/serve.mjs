// Starts Platformatic DB from platformatic.json and listens on HOST:PORT (default 127.0.0.1:3042), as the
// benchmark's other servers do. `plt-db start` (2.61) replaces the configured hostname with 0.0.0.0
// whenever /.dockerenv exists, which would open the benchmark's database to every interface of a
// container; so the server is built from the same configuration and told where to listen here.
import { join } from 'node:path'
import { buildServer } from '@platformatic/db'

const app = await buildServer(join(import.meta.dirname, 'platformatic.json'))
await app.listen({ host: process.env.HOST ?? '127.0.0.1', port: Number(process.env.PORT ?? 3042) })

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    app.close().then(() => process.exit(0), (err) => {
      app.log.error({ err }, 'close failed')
      process.exit(1)
    })
  })
}
