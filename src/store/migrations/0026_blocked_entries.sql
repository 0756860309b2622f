-- Entries no runner can take now (a pool at its limit, a placement no runner satisfies, a drained
-- group, a pinned runner that is busy) are set aside out of the claim path, keyed by what would
-- change it, so they never hide an entry behind them that an idle runner could take. blocked_on
-- is NULL for every claimable entry: the claim's indexes hold those alone, and a second small
-- index holds the blocked ones by key, then in (lane, position) order; a reader wanting the whole
-- queue in order merges the two.
ALTER TABLE queue_ready ADD COLUMN blocked_on text, ADD COLUMN blocked_at timestamptz;

DROP INDEX queue_ready_shard_order_idx;
CREATE INDEX queue_ready_shard_order_idx ON queue_ready (shard, lane, position) WHERE blocked_on IS NULL;
DROP INDEX queue_ready_order_idx;
CREATE INDEX queue_ready_order_idx ON queue_ready (lane, position) WHERE blocked_on IS NULL;
DROP INDEX queue_ready_site_idx;
CREATE INDEX queue_ready_site_idx ON queue_ready (site_stamp, lane, position) WHERE site_stamp IS NOT NULL AND blocked_on IS NULL;
-- Keyed: the check after a run's step ends reads that run's blocked entries alone.
CREATE INDEX queue_ready_blocked_idx ON queue_ready (blocked_on, lane, position) WHERE blocked_on IS NOT NULL;
