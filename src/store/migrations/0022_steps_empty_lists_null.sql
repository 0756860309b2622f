-- A step that needs nothing and is in no pool (most of them) stores NULL for both lists instead
-- of two empty arrays (13 B each). Readers map NULL to an empty list; `name = ANY(needs)` is
-- never true for it, as for '{}'.
ALTER TABLE steps ALTER COLUMN needs DROP NOT NULL;
ALTER TABLE steps ALTER COLUMN pools DROP NOT NULL;
