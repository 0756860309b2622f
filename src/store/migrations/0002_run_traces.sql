-- Each run is one trace. trace_id is the caller's (a W3C traceparent given at submit) or, with
-- none, a random one taken here, so every replica derives the same span ids from the store alone.
-- Runs from before this migration keep NULL and derive theirs from the run id.
ALTER TABLE runs ADD COLUMN trace_id text;
ALTER TABLE runs ALTER COLUMN trace_id SET DEFAULT replace(gen_random_uuid()::text, '-', '');
-- The caller's span (the parent of the run span) and its trace flags, when a traceparent was given.
ALTER TABLE runs ADD COLUMN trace_parent_span text;
ALTER TABLE runs ADD COLUMN trace_flags smallint;
-- How many times `runs retry` reopened the run, and when it last did: each round is its own run
-- span (a finished run's span is emitted once), the attempts of a round its children.
ALTER TABLE runs ADD COLUMN trace_round integer NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN trace_round_at timestamptz;
ALTER TABLE runs ADD CONSTRAINT runs_trace_id_hex CHECK (trace_id IS NULL OR trace_id ~ '^[0-9a-f]{32}$');
ALTER TABLE runs ADD CONSTRAINT runs_trace_parent_span_hex CHECK (trace_parent_span IS NULL OR trace_parent_span ~ '^[0-9a-f]{16}$');

-- How many times a lease was renewed, for its span (a renewal rewrites the row anyway; NULL is
-- none, so a lease never renewed carries nothing).
ALTER TABLE step_leases ADD COLUMN renewals integer;
