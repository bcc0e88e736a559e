-- Content's trigram index over its words joined (src/repositories/search-match.ts): a phrase's
-- trigrams then span its spaces. Built before the old one is dropped, so search always has one.
CREATE INDEX "messages_content_words_trgm_idx" ON "messages" USING gin ((replace(lower("content"), ' ', '0')) gin_trgm_ops);--> statement-breakpoint
DROP INDEX "messages_content_trgm_idx";
