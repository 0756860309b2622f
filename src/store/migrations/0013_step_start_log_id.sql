-- The line "attempt N started on runner R" is no longer written when an attempt is delivered: it
-- is read from the step (attempt, runner_id, started_at) under an id reserved for it from
-- step_logs' own sequence by the statement that starts the step. The reserved id gives the line
-- its place among the step's stored lines (and the readers' per-step cursors); when the attempt's
-- start is about to be forgotten (requeued, retried) the line is written under that id.
-- NULL: the current attempt has not started, or its started line was written (before this column).
ALTER TABLE steps ADD COLUMN start_log_id bigint;
