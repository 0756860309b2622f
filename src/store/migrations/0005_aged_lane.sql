-- The aged any-shard lane asks for "ready longer than the fallback window, any shard". Without an
-- index on ready_at, a replica holding few shards scans the whole queue each tick to learn that
-- nothing has aged yet; with it, the claim is a bitmap OR of the shard and ready_at indexes.
CREATE INDEX queue_ready_ready_at_idx ON queue_ready (ready_at);
