-- The search indexes (GIN, drizzle/0003, 0011, 0012) take new messages into a pending list and merge it into
-- their posting trees when it outgrows gin_pending_list_limit. That merge walks one posting tree per distinct
-- trigram or word join in the list, so its cost hardly depends on how many messages the list holds: a larger
-- list costs less per message. Merged by the inserting statement, it is also a stall of hundreds of
-- milliseconds for whichever create overflowed it, deeper as the table grows (docs/benchmarks.md, "Writes
-- against size"). So the lists may hold 32 MB, and the service merges them in the background
-- (search_pending_lists_merge, src/search/pending-lists.ts, every 5 s) before they fill; a burst that fills one
-- still merges in the insert, as before, so nothing depends on the background task running.
ALTER INDEX messages_subject_trgm_idx SET (fastupdate = on, gin_pending_list_limit = 32768);--> statement-breakpoint
ALTER INDEX messages_content_words_trgm_idx SET (fastupdate = on, gin_pending_list_limit = 32768);--> statement-breakpoint
ALTER INDEX messages_content_joins_idx SET (fastupdate = on, gin_pending_list_limit = 32768);--> statement-breakpoint
-- Merges the pending list of every GIN index on messages into its main structure; returns the pages merged.
-- The advisory lock keeps two instances from merging at once; a merge never blocks inserts, which append
-- to the list meanwhile.
CREATE FUNCTION search_pending_lists_merge() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  merged bigint := 0;
  index_oid oid;
BEGIN
  IF NOT pg_try_advisory_xact_lock(7300452034) THEN RETURN 0; END IF;
  FOR index_oid IN
    SELECT i.indexrelid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
    WHERE i.indrelid = 'messages'::regclass AND a.amname = 'gin' ORDER BY c.relname
  LOOP
    merged := merged + gin_clean_pending_list(index_oid::regclass);
  END LOOP;
  RETURN merged;
END $$;
