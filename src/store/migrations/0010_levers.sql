-- System quiesce: the platform's own hold on offers, lifted independently of the fleet quiesce.
ALTER TABLE fleet_posture ADD COLUMN system_quiesced boolean NOT NULL DEFAULT false;

-- One row per posture in force: who pulled it, why, since when and (optionally) until when the
-- leader lifts it. fleet_posture keeps the flags every dispatch tick reads; this keeps the story.
CREATE TABLE posture_holds (
  posture  text PRIMARY KEY CHECK (posture IN ('quiesced', 'halted', 'system_quiesced')),
  reason   text,
  actor    text NOT NULL,
  source   text,
  since    timestamptz NOT NULL DEFAULT now(),
  until    timestamptz
);

-- Retention finds finished runs oldest first without reading the running ones.
CREATE INDEX runs_finished_idx ON runs (finished_at, id) WHERE finished_at IS NOT NULL;

-- `admin audit --actor A` reads one actor's levers newest first.
CREATE INDEX audit_log_actor_idx ON audit_log (actor, at DESC);
