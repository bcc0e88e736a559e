-- A page located in the order-statistic counters (src/pages/locate.ts) reads up to 256 bucket counts at each
-- of four levels. The rows of neighbouring buckets lie on different pages of the table, since each was
-- written when its bucket first filled and moved when updated, so each count was a page of its own to
-- visit: 4.2 ms for the 256 counts of one level at 10,000,000 messages, 0.5 ms read from the index
-- alone. The primary key now carries each row's count, so the counts of buckets no write touches any
-- more (all but the newest) are read from the index (docs/benchmarks.md, "Counts from the index").
-- The cost: with n in an index, no update of a count is heap-only (under a stream of creates 94% were), so
-- each adds an index entry. Creates at 1,000,000 messages measured within the machine's noise either way.
CREATE UNIQUE INDEX pagination_counts_with_n ON pagination_counts (table_name, key, dim, bucket, slot) INCLUDE (n);--> statement-breakpoint
ALTER TABLE pagination_counts DROP CONSTRAINT pagination_counts_table_name_key_dim_bucket_slot_pk;--> statement-breakpoint
ALTER TABLE pagination_counts ADD CONSTRAINT pagination_counts_table_name_key_dim_bucket_slot_pk PRIMARY KEY USING INDEX pagination_counts_with_n;
