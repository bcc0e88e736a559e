#!/usr/bin/env bash
# The write path's profile (docs/journal/2026-11-27-writes-against-size.md): the POST row of `npm run bench` on a
# server started with `npm run bench:cluster -- start --profile`, then where PostgreSQL's time, WAL and buffers
# went per created message. Usage: DATABASE_URL=postgres://…/size1000000 bash bench/write-profile/run.sh <messages> <out-name> [bench options]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
messages=$1 out=$2
shift 2
: "${DATABASE_URL:?DATABASE_URL must name the database to profile}"
q() { psql "$DATABASE_URL" -qAtX -c "$1"; }
# Seed first (a no-op when the table is full), so that the statistics cover the row alone.
(cd "$here/../.." && npm run -s seed -- --messages "$messages" --if-empty) | tail -n 1
psql "$DATABASE_URL" -qX -f "$here/reset.sql" >/dev/null
first=$(q "select coalesce(max(id), 0) from messages")
# A GIN index flushes its pending list when it outgrows gin_pending_list_limit: sampled every 0.2 s,
# each drop of its pending pages is one flush, by an inserting backend or by (auto)vacuum.
samples=$(mktemp)
( while :; do q "select string_agg(s.pending_pages::text, ' ' order by c.relname) from pg_class c join pg_index i on i.indexrelid = c.oid join pg_am a on a.oid = c.relam, lateral pgstatginindex(c.oid) s where i.indrelid = 'messages'::regclass and a.amname = 'gin'" >>"$samples" 2>/dev/null || true; sleep 0.2; done ) &
sampler=$!
trap 'kill $sampler 2>/dev/null || true; rm -f "$samples"' EXIT
(cd "$here/../.." && BENCH_INSERT_REFERENCE=off npm run -s bench -- --messages "$messages" --rows post --targets service,ceiling --out "$out" "$@")
kill $sampler 2>/dev/null || true
created=$(q "select count(*) from messages where id > $first")
echo "GIN pending-list flushes during the run (drops of pending pages, per index in name order):"
awk '{ for (i = 1; i <= NF; i++) { if (NR > 1 && $i < last[i]) flushes[i]++; last[i] = $i } } END { for (i = 1; i <= NF; i++) printf "  index %d: %d flushes, pending pages at the end %d\n", i, flushes[i], last[i] }' "$samples"
CREATED=$created psql "$DATABASE_URL" -qX -f "$here/report.sql"
