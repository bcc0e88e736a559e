-- After a write row: where the database's time went, per created message (bench/write-profile/README.md).
\pset footer off
\set created `echo ${CREATED:-0}`
\echo 'Messages created during the row:' :created

\echo '\nStatements, trigger bodies included (pg_stat_statements, track = all), by total time:'
SELECT round(total_exec_time::numeric, 0) AS total_ms,
       calls,
       round((total_exec_time / nullif(:created, 0) * 1000)::numeric, 1) AS us_per_created,
       rows,
       shared_blks_hit + shared_blks_read AS blocks, shared_blks_read AS read, shared_blks_dirtied AS dirtied,
       wal_bytes, wal_fpi,
       left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS statement
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time DESC LIMIT 14;

\echo '\nTrigger and other functions (track_functions = all): self time excludes the statements they run:'
SELECT funcname, calls, round(total_time::numeric, 0) AS total_ms, round(self_time::numeric, 0) AS self_ms,
       round((total_time / nullif(:created, 0) * 1000)::numeric, 1) AS us_per_created
FROM pg_stat_user_functions ORDER BY total_time DESC LIMIT 10;

\echo '\nWAL (pg_stat_wal) per created message:'
SELECT wal_records, wal_fpi, pg_size_pretty(wal_bytes) AS wal, round(wal_bytes / nullif(:created, 0)) AS bytes_per_created,
       round(wal_fpi::numeric / nullif(:created, 0), 2) AS fpi_per_created, wal_write, wal_sync,
       round(wal_sync_time::numeric, 0) AS sync_ms
FROM pg_stat_wal;

\echo '\nBuffers per created message, by relation (heap and indexes of the tables a create writes):'
SELECT relname, heap_blks_read + coalesce(idx_blks_read, 0) AS read, heap_blks_hit + coalesce(idx_blks_hit, 0) AS hit,
       round(((heap_blks_read + coalesce(idx_blks_read, 0) + heap_blks_hit + coalesce(idx_blks_hit, 0))::numeric / nullif(:created, 0)), 1) AS blocks_per_created
FROM pg_statio_user_tables WHERE relname IN ('messages', 'users', 'pagination_counts', 'message_changes', 'idempotency_keys') ORDER BY relname;
SELECT indexrelname, idx_blks_read AS read, idx_blks_hit AS hit, round(((idx_blks_read + idx_blks_hit)::numeric / nullif(:created, 0)), 1) AS blocks_per_created
FROM pg_statio_user_indexes WHERE relname = 'messages' ORDER BY idx_blks_read + idx_blks_hit DESC;

\echo '\nBackground writes (pg_stat_bgwriter): checkpoints and who wrote dirty buffers out:'
SELECT checkpoints_timed, checkpoints_req, buffers_checkpoint, buffers_clean, buffers_backend, buffers_backend_fsync, buffers_alloc FROM pg_stat_bgwriter;

\echo '\nGIN search indexes: fastupdate, pending list now (pgstatginindex):'
SELECT c.relname, coalesce((SELECT option_value FROM pg_options_to_table(c.reloptions) WHERE option_name = 'fastupdate'), 'on (default)') AS fastupdate,
       s.pending_pages, s.pending_tuples, pg_size_pretty(pg_relation_size(c.oid)) AS size
FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid JOIN pg_am a ON a.oid = c.relam, LATERAL pgstatginindex(c.oid) s
WHERE i.indrelid = 'messages'::regclass AND a.amname = 'gin' ORDER BY c.relname;
