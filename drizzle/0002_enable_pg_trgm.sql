-- Trigram indexes make case-insensitive substring search (ILIKE '%q%') an index scan.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
