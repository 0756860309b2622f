-- A registration token names the runner groups it may register into. A token that names none
-- (NULL, as every token issued before this) may join only groups that are not exclusive: an
-- exclusive group is a trust boundary, and joining it takes a token issued for it.
ALTER TABLE tokens ADD COLUMN groups text[];
ALTER TABLE tokens ADD CONSTRAINT tokens_groups_for_registration CHECK (groups IS NULL OR (kind = 'registration' AND cardinality(groups) > 0));
