-- A retried acquire finds its offers among its runner's leases (a handful, through the runner
-- index); a second index on (runner, request) cost every delivery an insert for that rare lookup.
DROP INDEX IF EXISTS scheduler_job_leases_request_idx;
