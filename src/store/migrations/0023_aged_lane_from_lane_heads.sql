-- The aged any-shard lane reads the head of each lane through the (lane, position) index: the
-- entries that have waited longest are first in it. The index on ready_at it used instead cost
-- every enqueue an index entry (66 B of WAL per step) for a question asked of a few entries.
DROP INDEX IF EXISTS queue_ready_ready_at_idx;
