-- A run cancelled (by any process: a CLI writing to the store has no exporter) whose spans no
-- replica has sent yet. A replica with traces on claims such runs (FOR UPDATE SKIP LOCKED, so one
-- replica sends each) and clears the flag as it does; NULL otherwise, so the index holds only them.
ALTER TABLE runs ADD COLUMN trace_unsent boolean;
CREATE INDEX runs_trace_unsent_idx ON runs (id) WHERE trace_unsent;
