-- The expiry sweep reads the lease table every few seconds; it holds only the work out on runners
-- now, so a scan of it is cheap. Without an index on expires_at, every delivery saves an index
-- insert and every renewal is an in-place (HOT) update.
DROP INDEX IF EXISTS scheduler_job_leases_expiry_idx;
ALTER TABLE scheduler_job_leases SET (fillfactor = 80);
