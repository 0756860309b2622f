-- What an entry waited behind while it was set aside out of the claim path, for the queue span of
-- its attempt: blocked_verdict is the verdict it was set aside on (blocked_on only keys what would
-- free it), and waited sums, per verdict, the milliseconds it spent set aside, added when it comes
-- back. A lease carries waited as it carries the entry's other columns, so it survives a return,
-- a reclaim or a failover, and the replica that ends the attempt reads it from the store. NULL: it
-- never waited behind a blocking verdict.
ALTER TABLE queue_ready ADD COLUMN blocked_verdict text;
ALTER TABLE queue_ready ADD COLUMN waited jsonb;
ALTER TABLE step_leases ADD COLUMN waited jsonb;
