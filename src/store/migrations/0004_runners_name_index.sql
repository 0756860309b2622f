-- A registration looks up the live runners of its name (runnerRegisterExclusive), as do drains and
-- removals by name: without an index each read every live runner, so registering a fleet of N
-- cost N²/2 row reads (1,000 runners: 310,000).
CREATE INDEX runners_name_live_idx ON runners (name) WHERE deleted_at IS NULL;
