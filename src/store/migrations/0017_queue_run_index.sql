-- The few reads of one run's queue entries (cancel, `runs show`, pins, retention) reach them
-- through the run's steps and the queue's primary key; an index by run cost every enqueue and
-- every delivery an index entry for them.
DROP INDEX IF EXISTS queue_ready_run_idx;
