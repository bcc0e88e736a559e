#!/usr/bin/env bash
# Zero downtime, checked on real processes: three compiled API instances behind HAProxy running
# deploy/haproxy.cfg, a rolling SIGTERM restart and a SIGKILL under a steady mixed load and live
# clients of the change feed (SSE and long-polls), and the database and every client's copy checked
# afterwards (scripts/rolling-restart/main.ts). Needs HAProxy (Debian: haproxy) and
# a PostgreSQL server (ADMIN_DATABASE_URL, default the local one); .ci/run installs HAProxy and runs
# this after the test suite. NODE_BIN names the node binary the instances run on (default: node).
# Further arguments go to the check (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v haproxy >/dev/null 2>&1 || { echo "rolling-restart check: HAProxy is not installed (Debian: apt-get install haproxy)" >&2; exit 1; }
haproxy -c -q -f deploy/haproxy.cfg || { echo "rolling-restart check: haproxy -c rejects deploy/haproxy.cfg" >&2; exit 1; }
npm run -s build
exec node --import tsx scripts/rolling-restart/main.ts --node "${NODE_BIN:-$(command -v node)}" "$@"
