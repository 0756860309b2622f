-- Triggers: named run templates, cron schedules, one-shots, signed webhooks and their deliveries,
-- and the tick ledger (every due tick of every trigger, with its outcome). Each due-time source
-- has a partial index so the launch loop's probe is one index lookup per source.

-- A named run definition; every put is a new version. Runs started from it record name and version.
CREATE TABLE run_templates (
  name                 text NOT NULL,
  version              integer NOT NULL,
  source               text NOT NULL,
  max_concurrent_runs  integer CHECK (max_concurrent_runs IS NULL OR max_concurrent_runs > 0),
  daily_ceiling        integer CHECK (daily_ceiling IS NULL OR daily_ceiling > 0),
  created_by           text,
  created_at           timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (name, version)
);

-- Schedules, one-shots and webhooks share one id space: `triggers show ID` needs no kind.
CREATE SEQUENCE trigger_id_seq;

CREATE TABLE schedules (
  id           bigint PRIMARY KEY DEFAULT nextval('trigger_id_seq'),
  template     text NOT NULL,
  cron         text NOT NULL,
  tz           text NOT NULL DEFAULT 'UTC',
  overlap      text NOT NULL DEFAULT 'skip' CHECK (overlap IN ('skip', 'queue', 'allow')),
  catch_up     text NOT NULL DEFAULT 'none' CHECK (catch_up IN ('none', 'last', 'all')),
  sets         jsonb NOT NULL DEFAULT '[]'::jsonb,
  enabled      boolean NOT NULL DEFAULT true,
  next_due_at  timestamptz NOT NULL,
  created_by   text,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX schedules_due_idx ON schedules (next_due_at) WHERE enabled;
CREATE INDEX schedules_template_idx ON schedules (template);

CREATE TABLE one_shots (
  id          bigint PRIMARY KEY DEFAULT nextval('trigger_id_seq'),
  template    text NOT NULL,
  fire_at     timestamptz NOT NULL,
  sets        jsonb NOT NULL DEFAULT '[]'::jsonb,
  enabled     boolean NOT NULL DEFAULT true,
  status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'fired')),
  fired_at    timestamptz,
  created_by  text,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX one_shots_due_idx ON one_shots (fire_at) WHERE status = 'pending' AND enabled;
CREATE INDEX one_shots_template_idx ON one_shots (template);

-- The signing secret is kept as given: the server needs it to compute the HMAC (docs/triggers.md).
CREATE TABLE webhooks (
  id          bigint PRIMARY KEY DEFAULT nextval('trigger_id_seq'),
  template    text NOT NULL,
  secret      text NOT NULL,
  sets        jsonb NOT NULL DEFAULT '[]'::jsonb,
  maps        jsonb NOT NULL DEFAULT '[]'::jsonb,
  enabled     boolean NOT NULL DEFAULT true,
  created_by  text,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_template_idx ON webhooks (template);

CREATE TABLE webhook_deliveries (
  id            bigserial PRIMARY KEY,
  webhook_id    bigint NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  -- The sender's delivery id, or one derived from the signature when it sends none.
  delivery_key  text NOT NULL,
  signature     text NOT NULL,
  payload       text NOT NULL,
  status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'accepted', 'settled')),
  received_at   timestamptz NOT NULL DEFAULT now(),
  settled_at    timestamptz,
  detail        text,
  UNIQUE (webhook_id, delivery_key),
  UNIQUE (webhook_id, signature)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (received_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_received_idx ON webhook_deliveries (received_at);

-- The tick ledger. A row in outcome 'pending' is an undispatched launch: accepted, its run not yet created.
CREATE TABLE trigger_ticks (
  id               bigserial PRIMARY KEY,
  trigger_id       bigint NOT NULL,
  kind             text NOT NULL CHECK (kind IN ('schedule', 'once', 'webhook')),
  template         text NOT NULL,
  due_at           timestamptz NOT NULL,
  recorded_at      timestamptz NOT NULL DEFAULT now(),
  outcome          text NOT NULL CHECK (outcome IN ('pending', 'fired', 'skipped_overlap', 'deduplicated', 'missed', 'failed')),
  overlap          text NOT NULL DEFAULT 'allow' CHECK (overlap IN ('skip', 'queue', 'allow')),
  sets             text[] NOT NULL DEFAULT '{}',
  delivery_id      bigint,
  deferred_reason  text,
  deferred_at      timestamptz,
  missed           boolean NOT NULL DEFAULT false,
  catch_up         text,
  run_id           bigint,
  fired_at         timestamptz,
  detail           text
);
CREATE INDEX trigger_ticks_pending_idx ON trigger_ticks (recorded_at) WHERE outcome = 'pending';
CREATE INDEX trigger_ticks_missed_idx ON trigger_ticks (due_at) WHERE outcome = 'missed' AND catch_up IS NULL;
CREATE INDEX trigger_ticks_trigger_idx ON trigger_ticks (trigger_id, id);
CREATE INDEX trigger_ticks_recorded_idx ON trigger_ticks (recorded_at);
-- One ledger row per schedule tick: a second attempt to record it is a deduplicated row.
CREATE UNIQUE INDEX trigger_ticks_schedule_once_idx ON trigger_ticks (trigger_id, due_at) WHERE kind = 'schedule' AND outcome <> 'deduplicated';

ALTER TABLE runs
  ADD COLUMN template_name     text,
  ADD COLUMN template_version  integer,
  ADD COLUMN trigger_id        bigint,
  ADD COLUMN trigger_payload   text;
CREATE INDEX runs_template_running_idx ON runs (template_name) WHERE status = 'running' AND template_name IS NOT NULL;
CREATE INDEX runs_template_created_idx ON runs (template_name, created_at) WHERE template_name IS NOT NULL;
CREATE INDEX runs_trigger_running_idx ON runs (trigger_id) WHERE status = 'running' AND trigger_id IS NOT NULL;
