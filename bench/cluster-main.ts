/** `npm run bench:cluster`: start or stop the benchmark's own PostgreSQL server (bench/database/own-cluster.ts). */
import { parseArgs } from 'node:util'
import { DEFAULT_DIR, SETTINGS, startCluster, stopCluster, type SettingsName } from './database/own-cluster.js'

const USAGE = `Usage: npm run bench:cluster -- start|stop [--settings debian|recommended] [--port <n>] [--dir <path>] [--profile]

Starts (initdb first when the directory is new) or stops a PostgreSQL server on 127.0.0.1 for the benchmark,
with Debian's default settings or with the settings docs/operations.md recommends. The data directory is kept between
runs (default: <tmp>/messages-api-bench-pg), and each start rewrites the settings, so the same databases can be
measured under both. --profile also loads
pg_stat_statements (track = all) and times functions and I/O. Prints the server's URL; then, for example:

  DATABASE_URL=postgres://postgres@127.0.0.1:5441/size10000000 npm run bench -- --messages 10000000 ...
`

async function main (): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      settings: { type: 'string', default: 'recommended' },
      port: { type: 'string', default: '5441' },
      dir: { type: 'string' },
      profile: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' }
    }
  })
  const [command] = positionals
  const settings = values.settings as SettingsName
  if (values.help === true || (command !== 'start' && command !== 'stop') || !(settings in SETTINGS) || !/^\d+$/.test(values.port)) {
    process.stdout.write(USAGE)
    return values.help === true ? 0 : 1
  }
  const dir = values.dir ?? DEFAULT_DIR
  if (command === 'stop') {
    stopCluster(dir)
    return 0
  }
  const url = await startCluster({ settings, dir, port: Number(values.port), profile: values.profile })
  process.stdout.write(`${url}\n`)
  return 0
}

process.exitCode = await main()
