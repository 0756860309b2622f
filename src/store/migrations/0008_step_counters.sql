-- Run progress as counters, so a completion never re-reads (or waits on) its run:
--   runs.open_steps   steps pending, ready or running; the run finishes when it reaches zero.
--   steps.unmet_needs needs of a pending step not yet succeeded; it becomes ready at zero.
--   steps.dependents  how many steps of the run need this one (0: its success frees nothing).
ALTER TABLE runs ADD COLUMN open_steps integer NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN unmet_needs integer NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN dependents integer NOT NULL DEFAULT 0;

UPDATE runs r SET open_steps = c.n
  FROM (SELECT run_id, count(*)::int AS n FROM steps WHERE status IN ('pending', 'ready', 'running') GROUP BY run_id) c
 WHERE c.run_id = r.id;
UPDATE steps d SET unmet_needs = (SELECT count(*) FROM steps n WHERE n.run_id = d.run_id AND n.name = ANY(d.needs) AND n.status <> 'succeeded')
 WHERE d.status = 'pending' AND cardinality(d.needs) > 0;
UPDATE steps s SET dependents = (SELECT count(*) FROM steps d WHERE d.run_id = s.run_id AND s.name = ANY(d.needs))
 WHERE EXISTS (SELECT 1 FROM steps d WHERE d.run_id = s.run_id AND s.name = ANY(d.needs));

-- Indexes no query needs: (run_id, name) is already unique, nothing looks leases up by holder.
DROP INDEX IF EXISTS steps_run_idx;
DROP INDEX IF EXISTS scheduler_job_leases_holder_idx;
-- Retention deletes done records by age; they are appended in done_at order, so a block range
-- index answers it at a fraction of a b-tree's per-step insert cost.
DROP INDEX IF EXISTS scheduler_done_at_idx;
CREATE INDEX scheduler_done_at_brin ON scheduler_done USING brin (done_at);

-- Room on each page for the in-place (HOT) updates a step and a run go through.
ALTER TABLE steps SET (fillfactor = 70);
ALTER TABLE runs SET (fillfactor = 80);
