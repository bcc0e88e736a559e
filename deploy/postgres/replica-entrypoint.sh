#!/bin/sh
# A streaming replica: on first start, copy the primary with pg_basebackup -R (which writes
# standby.signal and primary_conninfo), then run postgres as a hot standby.
set -eu
: "${PRIMARY_HOST:?PRIMARY_HOST is required}"
export PGPASSWORD="$REPLICATION_PASSWORD"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready -h "$PRIMARY_HOST" -p 5432 -q; do
    echo "waiting for the primary at $PRIMARY_HOST"
    sleep 2
  done
  rm -rf "${PGDATA:?}"/*
  pg_basebackup -h "$PRIMARY_HOST" -p 5432 -U replicator -D "$PGDATA" -R -X stream
  chmod 700 "$PGDATA"
fi
exec postgres -c hot_standby=on -c hot_standby_feedback=on
