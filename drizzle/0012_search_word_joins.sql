-- Word joins for phrase search (src/repositories/search-match.ts). A phrase of common words asks a
-- trigram index for trigrams that nearly every message holds, and reading their posting lists cost
-- most of the search. A join is the last three characters of a word, a space, and the first three of
-- the next word ("urgent report" -> 'ent rep'), taken between every two words of three characters or
-- more, with words split at single spaces of the lower-cased text: few messages share one.
CREATE FUNCTION message_word_joins(content text) RETURNS text[] LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  words text[] := string_to_array(lower(content), ' ');
  joins text[] := '{}';
BEGIN
  FOR i IN 2 .. coalesce(cardinality(words), 0) LOOP
    IF length(words[i - 1]) >= 3 AND length(words[i]) >= 3 THEN
      joins := joins || (right(words[i - 1], 3) || ' ' || left(words[i], 3));
    END IF;
  END LOOP;
  RETURN joins;
END
$$;--> statement-breakpoint
-- The joins every content holding the term holds. A content holding the term holds each of the term's
-- words between two spaces whole, its first word as the end of one and its last as the start of one,
-- so each join between two of the term's words of three characters or more is one of the content's.
-- Joins between two words of exactly three characters ('for the') are in nearly every message; they
-- are left out when the term has another join.
CREATE FUNCTION search_term_joins(term text) RETURNS text[] LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  WITH joins AS (
    SELECT right(w.word, 3) || ' ' || left(w.next, 3) AS j, length(w.word) > 3 OR length(w.next) > 3 AS rare
    FROM (SELECT t.word, lead(t.word) OVER (ORDER BY t.n) AS next
          FROM unnest(string_to_array(lower(term), ' ')) WITH ORDINALITY AS t(word, n)) w
    WHERE length(w.word) >= 3 AND length(w.next) >= 3)
  SELECT coalesce(array_agg(j) FILTER (WHERE rare OR NOT EXISTS (SELECT 1 FROM joins WHERE rare)), '{}') FROM joins
$$;--> statement-breakpoint
CREATE INDEX "messages_content_joins_idx" ON "messages" USING gin (message_word_joins("content"));
