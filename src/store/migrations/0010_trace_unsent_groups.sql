-- Spans owed by a transaction that ended attempts are recorded a row per 20 of them ('ended':
-- facts {"ends": [...], "runs": [...]}), not a row per attempt: a group of completions writes, and
-- later deletes, a few rows instead of one per step. An end is what only the ending call knew
-- (outcome, exit, the lease's times); the step, run and runner rows are read for the rest when the
-- spans are built. The runs the transaction ended go with its first row. run_id names the run of a
-- single-run row ('run', 'attempt': a cancel's or a requeue's) and is null for a transaction's row.
ALTER TABLE trace_unsent DROP CONSTRAINT trace_unsent_kind_check;
ALTER TABLE trace_unsent ADD CONSTRAINT trace_unsent_kind_check CHECK (kind IN ('run', 'attempt', 'ended'));
ALTER TABLE trace_unsent ALTER COLUMN run_id DROP NOT NULL;
-- A row of 20 ends is about 6 kB: kept inline and uncompressed up to the largest target a page
-- allows. Compressing it or moving it out of line cost the group's transaction, which every
-- runner call of the group waits for, 4 ms.
ALTER TABLE trace_unsent SET (toast_tuple_target = 8160);
