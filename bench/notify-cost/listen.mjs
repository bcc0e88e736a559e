// A LISTEN session that reads every notification (as a live-delivery watcher would) and, when
// stopped with SIGTERM, prints how many arrived. Started by run.sh.
import postgres from 'postgres'
const sql = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => {} })
let received = 0
await sql.listen('messages', () => { received++ })
process.stdout.write('listening\n')
process.once('SIGTERM', async () => {
  process.stdout.write(`received ${received}\n`)
  await sql.end({ timeout: 1 })
  process.exit(0)
})
