#!/usr/bin/env bash
# NOTIFY's cost on the write path: pgbench runs of insert.sql against the migrated, seeded database
# $DB, in variants a-d (variant-*.sql), at 1, 4, 8 and 16 clients, 20 s each, two rounds with the
# variant order reversed in the second; b and c also with a LISTEN session reading (listen.mjs).
# Besides tps and latency, the CPU the pgbench backends themselves used from second 2 to 19 of the
# run (utime+stime in /proc), per transaction.
# One line per run on stdout: round variant listener clients tps latency_avg_ms backend_cpu_us_per_tx
set -euo pipefail
cd "$(dirname "$0")"
export PATH=/usr/lib/postgresql/15/bin:$PATH
DB=${DB:-notifycost}
PSQL=(psql -h 127.0.0.1 -U postgres -d "$DB" -qAt -v ON_ERROR_STOP=1)
USERS=$("${PSQL[@]}" -c 'SELECT max(id) FROM users')
backend_ticks () { # utime+stime of the given pids, in clock ticks
  local sum=0 pid
  for pid in "$@"; do
    [ -r "/proc/$pid/stat" ] || continue
    sum=$(( sum + $(awk '{ print $14 + $15 }' "/proc/$pid/stat") ))
  done
  echo "$sum"
}
sample_cpu () { # CPU seconds of the pgbench backends between second 2 and second 19
  sleep 2
  local pids t1 t2
  pids=$("${PSQL[@]}" -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'")
  t1=$(backend_ticks $pids)
  sleep 17
  t2=$(backend_ticks $pids)
  echo "$(( t2 - t1 ))"
}
run () { # round variant listener clients
  local round=$1 variant=$2 listener=$3 clients=$4 pid='' out ticks tps
  "${PSQL[@]}" -f "variant-$variant.sql"
  "${PSQL[@]}" -c 'CHECKPOINT'
  if [ "$listener" = yes ]; then
    DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB" node listen.mjs > "${TMPDIR:-/tmp}/listen-$round-$variant-$clients.log" &
    pid=$!
    until grep -q listening "${TMPDIR:-/tmp}/listen-$round-$variant-$clients.log" 2>/dev/null; do sleep 0.1; done
  fi
  sample_cpu > cpu.tmp &
  out=$(pgbench -h 127.0.0.1 -U postgres -n -M prepared -f insert.sql -D users="$USERS" -c "$clients" -j "$(( clients < 2 ? 1 : 2 ))" -T 20 "$DB" 2>&1)
  wait $!
  ticks=$(cat cpu.tmp)
  if [ -n "$pid" ]; then kill -TERM "$pid"; wait "$pid" || true; fi
  tps=$(grep -oP 'tps = \K[0-9.]+' <<<"$out")
  echo "$round $variant $listener $clients $tps $(grep -oP 'latency average = \K[0-9.]+' <<<"$out") $(awk -v t="$ticks" -v tps="$tps" 'BEGIN { printf "%.0f", t * 10000 / (tps * 17) }')"
}
for round in 1 2; do
  if [ "$round" = 1 ]; then order=(a b c d); else order=(d c b a); fi
  for clients in 1 4 8 16; do
    for variant in "${order[@]}"; do run "$round" "$variant" no "$clients"; done
  done
  for clients in 1 16; do
    for variant in b c; do run "$round" "$variant" yes "$clients"; done
  done
done
"${PSQL[@]}" -f variant-a.sql
rm -f cpu.tmp
