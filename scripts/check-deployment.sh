#!/usr/bin/env bash
# Deployment checks that need no Docker engine: compose.yaml is accepted by `docker-compose config`,
# the HAProxy configuration by `haproxy -c` (where HAProxy is installed), and the output of
# `npm run build`, started with plain node, serves the API.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { printf 'deployment check failed: %s\n' "$*" >&2; exit 1; }

command -v docker-compose >/dev/null 2>&1 || fail "docker-compose is not installed (Debian: apt-get install docker-compose)"
AUTH_ISSUER=https://idp.example.com docker-compose -f compose.yaml config -q || fail "docker-compose config rejects compose.yaml"
echo "compose.yaml: accepted by $(docker-compose version --short)"
if command -v haproxy >/dev/null 2>&1; then
  haproxy -c -q -f deploy/haproxy.cfg || fail "haproxy -c rejects deploy/haproxy.cfg"
  echo "deploy/haproxy.cfg: accepted by haproxy -c"
fi

npm run -s build || fail "npm run build failed"

port=$(node -e "const s = require('node:net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close() })")
log=$(mktemp)
NODE_ENV=production AUTH_ISSUER=http://127.0.0.1:9 DATABASE_URL=memory:// HOST=127.0.0.1 PORT="$port" LOG_LEVEL=warn \
  node dist/src/server.js >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT

# GET /health, /health/ready and /v2/messages on the compiled server; exit 0 only when all answer as the contract says.
node --input-type=module -e "
const base = 'http://127.0.0.1:$port'
const deadline = Date.now() + 60_000
for (;;) {
  try { if ((await fetch(base + '/health')).ok) break } catch {}
  if (Date.now() > deadline) { console.error('no answer on ' + base + ' within 60 s'); process.exit(1) }
  await new Promise((resolve) => setTimeout(resolve, 250))
}
const check = async (path, test) => {
  const res = await fetch(base + path)
  const body = await res.json()
  if (!test(res.status, body)) { console.error(path + ': unexpected ' + res.status + ' ' + JSON.stringify(body)); process.exit(1) }
  console.log('node dist/src/server.js: GET ' + path + ' ' + res.status)
}
await check('/health', (s, b) => s === 200 && b.ok === true)
await check('/health/ready', (s, b) => s === 200 && b.ok === true)
await check('/v2/messages', (s, b) => s === 200 && Array.isArray(b.data) && b.pagination?.page === 1)
" || { cat "$log" >&2; fail "the compiled server did not serve the API"; }

kill -TERM "$pid"
wait "$pid" || fail "the compiled server did not exit cleanly on SIGTERM (status $?)"
echo "node dist/src/server.js: stopped cleanly on SIGTERM"
