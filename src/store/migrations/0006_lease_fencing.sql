-- A completion is idempotent by (step, attempt): remember which token completed it, so a repeat
-- of the same completion answers ok while any other token is fenced.
ALTER TABLE scheduler_done ADD COLUMN token bigint;
ALTER TABLE scheduler_done ADD COLUMN runner_id text;

-- Delivered leases past their ack deadline or expiry are found by index, at any size.
CREATE INDEX scheduler_job_leases_ack_idx ON scheduler_job_leases (ack_deadline) WHERE acked_at IS NULL AND ack_deadline IS NOT NULL;
CREATE INDEX runners_credential_idx ON runners (credential_hash) WHERE deleted_at IS NULL;
