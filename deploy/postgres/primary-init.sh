#!/bin/sh
# Runs once, when the primary's data directory is first created (docker-entrypoint-initdb.d):
# a role that may stream WAL to replicas, and the pg_hba rule that lets it.
set -eu
psql -v ON_ERROR_STOP=1 -v password="$REPLICATION_PASSWORD" --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
create role replicator with replication login password :'password';
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
