-- Spans a replica owes the collector: one row per ended attempt or run round whose spans no
-- exporter has yet reported sent. Written in the transaction that ends the attempt or the run (so
-- a replica that dies before its exporter flushed loses nothing), deleted once the exporter
-- reports the spans sent, and claimed (FOR UPDATE SKIP LOCKED) by any replica with traces on once
-- claimable_at has passed: the writer's grace to send them itself, or at once for a cancel, whose
-- writer may export nothing. A claim moves claimable_at on by the same grace, so a claimer that
-- dies too leaves the row to the next one.
--
-- facts holds everything the spans are built from, as it was when the row was written, so a retry
-- that reopens the run or moves a step to its next attempt right after cannot change or erase them.
CREATE TABLE trace_unsent (
  id            bigserial PRIMARY KEY,
  run_id        bigint NOT NULL,
  kind          text NOT NULL CHECK (kind IN ('run', 'attempt')),
  facts         jsonb NOT NULL,
  marked_at     timestamptz NOT NULL DEFAULT now(),
  claimable_at  timestamptz NOT NULL DEFAULT now()
);
-- The claim's order, and the history pruner's: rows no replica claimed for as long as finished
-- runs are kept (traces off everywhere) go with the history, by this index.
CREATE INDEX trace_unsent_claimable_idx ON trace_unsent (claimable_at);

-- Runs a cancel marked under 0006 and no replica has sent yet: their run round and the attempts the
-- cancel stopped, as the replicas of 0006 would have read them.
INSERT INTO trace_unsent (run_id, kind, facts)
SELECT r.id, 'run',
       jsonb_build_object('id', r.id, 'name', r.name, 'project', r.project, 'traceId', r.trace_id, 'parentSpanId', r.trace_parent_span,
                          'parentFlags', r.trace_flags, 'round', r.trace_round, 'status', r.status, 'cause', r.cause, 'createdAt', r.created_at,
                          'roundAt', r.trace_round_at, 'finishedAt', r.finished_at, 'triggerId', r.trigger_id, 'templateName', r.template_name, 'launch', NULL)
  FROM runs r
 WHERE r.trace_unsent AND r.status <> 'running' AND r.finished_at IS NOT NULL;

INSERT INTO trace_unsent (run_id, kind, facts)
SELECT r.id, 'attempt',
       jsonb_build_object('run', jsonb_build_object('id', r.id, 'name', r.name, 'project', r.project, 'traceId', r.trace_id, 'parentSpanId', r.trace_parent_span,
                                                    'parentFlags', r.trace_flags, 'round', r.trace_round),
                          'stepId', s.id, 'step', s.name, 'attempt', s.attempt, 'outcome', 'cancelled', 'exitCode', s.exit_code, 'cause', s.cause,
                          'event', NULL, 'runnerId', s.runner_id, 'runnerName', rn.name, 'runnerGroup', rn.group_name, 'logBytes', s.log_bytes,
                          'startedAt', s.started_at, 'finishedAt', s.finished_at, 'lease', NULL)
  FROM runs r
  JOIN steps s ON s.run_id = r.id
  LEFT JOIN runners rn ON rn.id = s.runner_id
 WHERE r.trace_unsent AND r.status <> 'running' AND s.status = 'cancelled' AND s.finished_at IS NOT NULL
   AND s.started_at >= coalesce(r.trace_round_at, r.created_at);

DROP INDEX runs_trace_unsent_idx;
ALTER TABLE runs DROP COLUMN trace_unsent;
