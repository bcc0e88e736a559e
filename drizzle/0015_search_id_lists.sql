-- The ids of a search term's matches, gathered by parallel workers. A common word has a match on nearly every
-- page of the table, and reading them is one pass over the table's pages, checked row by row
-- (docs/benchmarks.md, "A common word at 10,000,000"). array_agg cannot be combined across workers before
-- PostgreSQL 16, so each matching row went through the Gather node, and two workers read no faster than one
-- backend. This aggregate combines the workers' lists, so each worker hands over one list. The order is the
-- service's to make (src/search/id-lists.ts): the lists come back in no particular order. Over bigint, so
-- that a list's text is digits and commas alone (a float8 of 16 digits prints with an exponent).
CREATE AGGREGATE search_id_list(bigint) (
  SFUNC = array_append,
  STYPE = bigint[],
  COMBINEFUNC = array_cat,
  INITCOND = '{}',
  PARALLEL = SAFE
);
