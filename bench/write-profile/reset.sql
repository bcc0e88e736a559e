-- Before a write row: every statistic the profile reads starts from zero (bench/write-profile/README.md).
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE EXTENSION IF NOT EXISTS pgstattuple;
SELECT pg_stat_statements_reset();
SELECT pg_stat_reset();
SELECT pg_stat_reset_shared('wal');
SELECT pg_stat_reset_shared('bgwriter');
