-- How much output the current attempt of a step has stored, so the per-step cap
-- (logs.max_step_bytes) is checked by the same UPDATE that counts a batch, without re-reading
-- the log. log_attempt says which attempt the count belongs to: a retry starts again from zero.
ALTER TABLE steps ADD COLUMN log_bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN log_attempt integer NOT NULL DEFAULT 0;
