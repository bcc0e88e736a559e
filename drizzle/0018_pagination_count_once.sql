-- The grouping of a statement's rows into counter rows is written once, in messages_pagination_apply
-- (src/db/triggers/functions.ts holds the canonical text of every trigger's function). drizzle/0008 and
-- drizzle/0017 repeated it over new_rows in the insert path of the trigger, because a transition table
-- cannot be passed to a function; two copies of the keys and buckets had to be kept in step by hand.
-- Inserts now pass their rows to apply as arrays, as deletes and updates do: one element for a create,
-- and for a bulk load the arrays drizzle/0008 measured. The counter rows written are the same.
CREATE OR REPLACE FUNCTION messages_pagination_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM messages_pagination_apply(array_agg(1), array_agg(r.priority::text), array_agg(r.id), array_agg(r.created_at), array_agg(r.author_id), array_agg(r.subject)) FROM new_rows r;
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM messages_pagination_apply(array_agg(-1), array_agg(r.priority::text), array_agg(r.id), array_agg(r.created_at), array_agg(r.author_id), array_agg(r.subject)) FROM old_rows r;
  ELSE
    PERFORM messages_pagination_apply(array_agg(r.s), array_agg(r.priority::text), array_agg(r.id), array_agg(r.created_at), array_agg(r.author_id), array_agg(r.subject))
    FROM (SELECT 1 AS s, priority, id, created_at, author_id, subject FROM new_rows
          UNION ALL SELECT -1, priority, id, created_at, author_id, subject FROM old_rows) r;
  END IF;
  RETURN NULL;
END $$;
