-- A retried acquire finds the offers it was handed by runner and request id. The id is the
-- runner's own string (a UUID from opschain's agents: 37 B as text, in every lease row); the
-- lease keeps a 64-bit digest of it instead (hashtextextended), matched the same way. request_id
-- stays, no longer written, so a replica of the previous release can still insert its leases
-- while a rolling upgrade is under way.
ALTER TABLE scheduler_job_leases ADD COLUMN request_key bigint;

-- Most steps are in no pool. An empty array is 13 B in each queue row and each lease row; a
-- NULL is a bit in the null bitmap. Readers treat NULL as no pools (cardinality(NULL) is NULL,
-- so `cardinality(pools) > 0` stays false).
ALTER TABLE queue_ready ALTER COLUMN pools DROP NOT NULL;
ALTER TABLE scheduler_job_leases ALTER COLUMN pools DROP NOT NULL;

-- When an entry was first queued is read by nothing (ready_at is what ages an entry and what a
-- return keeps): new queue and lease rows leave it NULL instead of carrying 8 B each. The columns
-- stay for a replica of the previous release during a rolling upgrade.
ALTER TABLE queue_ready ALTER COLUMN enqueued_at DROP NOT NULL, ALTER COLUMN enqueued_at DROP DEFAULT;
ALTER TABLE scheduler_job_leases ALTER COLUMN enqueued_at DROP NOT NULL;
