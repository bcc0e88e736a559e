/**
 * A collector that keeps nothing: an OTLP/HTTP endpoint on loopback that answers every export 200 and
 * counts what it got, so that the tracing rows measure the service's cost of tracing, not a collector's.
 * `node --import tsx bench/tracing/otlp-sink.ts <port>`; prints its totals on SIGTERM.
 */
import { createServer } from 'node:http'

const port = Number(process.argv[2] ?? 4318)
let exports = 0
let bytes = 0
const server = createServer((request, response) => {
  request.on('data', (chunk: Buffer) => { bytes += chunk.length })
  request.on('end', () => {
    exports++
    response.writeHead(200, { 'content-type': request.headers['content-type'] ?? 'application/x-protobuf' })
    response.end()
  })
})
server.listen(port, '127.0.0.1', () => { process.stdout.write(`otlp-sink: listening on 127.0.0.1:${port}\n`) })
process.on('SIGTERM', () => {
  process.stdout.write(`otlp-sink: ${exports} exports, ${bytes} bytes\n`)
  server.close()
  process.exit(0)
})
