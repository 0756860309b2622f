-- Orchestration state.
CREATE TABLE runs (
  id                  bigserial PRIMARY KEY,
  name                text NOT NULL,
  project             text NOT NULL DEFAULT 'default',
  target              text,
  scope               text NOT NULL DEFAULT 'step' CHECK (scope IN ('step', 'run')),
  max_parallel_steps  integer NOT NULL DEFAULT 1,
  priority            smallint NOT NULL DEFAULT 0,
  env                 jsonb NOT NULL DEFAULT '{}'::jsonb,
  placement           jsonb,
  definition          jsonb NOT NULL,
  status              text NOT NULL DEFAULT 'running'
                        CHECK (status IN ('running', 'succeeded', 'failed', 'error', 'cancelled')),
  cause               text,
  created_by          text,
  created_at          timestamptz NOT NULL DEFAULT now(),
  finished_at         timestamptz
);
CREATE INDEX runs_created_idx ON runs (created_at DESC, id DESC);
CREATE INDEX runs_status_idx ON runs (status, created_at DESC);

CREATE TABLE steps (
  id           bigserial PRIMARY KEY,
  run_id       bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  name         text NOT NULL,
  command      text NOT NULL,
  needs        text[] NOT NULL DEFAULT '{}',
  env          jsonb NOT NULL DEFAULT '{}'::jsonb,
  timeout_ms   integer,
  placement    jsonb,
  pools        text[] NOT NULL DEFAULT '{}',
  load         real NOT NULL DEFAULT 1,
  priority     smallint,
  status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'ready', 'running', 'succeeded', 'failed', 'system_error', 'skipped', 'cancelled')),
  attempt      integer NOT NULL DEFAULT 0,
  runner_id    text,
  exit_code    integer,
  cause        text,
  started_at   timestamptz,
  finished_at  timestamptz,
  log_sealed   boolean NOT NULL DEFAULT false,
  UNIQUE (run_id, name)
);
CREATE INDEX steps_run_idx ON steps (run_id);

CREATE TABLE step_logs (
  id       bigserial PRIMARY KEY,
  step_id  bigint NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
  attempt  integer NOT NULL,
  stream   text NOT NULL CHECK (stream IN ('stdout', 'stderr', 'system')),
  chunk    text NOT NULL,
  at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX step_logs_step_idx ON step_logs (step_id, id);

-- Ready steps. One row per step at most; position is the FIFO order and survives a return.
CREATE SEQUENCE queue_position_seq;
CREATE TABLE queue_ready (
  step_id       bigint PRIMARY KEY,
  run_id        bigint NOT NULL,
  shard         smallint NOT NULL,
  attempt       integer NOT NULL,
  priority      smallint NOT NULL DEFAULT 0,
  lane          smallint NOT NULL DEFAULT 2,
  fair_key      text NOT NULL DEFAULT 'default',
  weight        real NOT NULL DEFAULT 1,
  pools         text[] NOT NULL DEFAULT '{}',
  requirement   jsonb,
  load          real NOT NULL DEFAULT 1,
  run_scope     boolean NOT NULL DEFAULT false,
  max_parallel  integer NOT NULL DEFAULT 1,
  site_stamp    text,
  ready_at      timestamptz NOT NULL DEFAULT now(),
  enqueued_at   timestamptz NOT NULL DEFAULT now(),
  position      bigint NOT NULL DEFAULT nextval('queue_position_seq')
);
CREATE INDEX queue_ready_shard_order_idx ON queue_ready (shard, lane, position);
CREATE INDEX queue_ready_order_idx ON queue_ready (lane, position);
CREATE INDEX queue_ready_site_idx ON queue_ready (site_stamp, lane, position) WHERE site_stamp IS NOT NULL;
CREATE INDEX queue_ready_run_idx ON queue_ready (run_id);

-- Live leases: the entry as it was claimed, plus who holds it and where it stands.
CREATE SEQUENCE lease_token_seq;
CREATE TABLE scheduler_job_leases (
  step_id       bigint PRIMARY KEY,
  run_id        bigint NOT NULL,
  shard         smallint NOT NULL,
  attempt       integer NOT NULL,
  priority      smallint NOT NULL DEFAULT 0,
  lane          smallint NOT NULL DEFAULT 2,
  fair_key      text NOT NULL DEFAULT 'default',
  weight        real NOT NULL DEFAULT 1,
  pools         text[] NOT NULL DEFAULT '{}',
  requirement   jsonb,
  load          real NOT NULL DEFAULT 1,
  run_scope     boolean NOT NULL DEFAULT false,
  max_parallel  integer NOT NULL DEFAULT 1,
  site_stamp    text,
  ready_at      timestamptz NOT NULL,
  enqueued_at   timestamptz NOT NULL,
  position      bigint NOT NULL,
  holder        text NOT NULL,
  token         bigint NOT NULL DEFAULT nextval('lease_token_seq'),
  claimed_at    timestamptz NOT NULL DEFAULT now(),
  delivered_at  timestamptz,
  runner_id     text,
  request_id    text,
  ack_deadline  timestamptz,
  acked_at      timestamptz,
  renewed_at    timestamptz,
  expires_at    timestamptz NOT NULL,
  executing     boolean NOT NULL DEFAULT false
);
CREATE INDEX scheduler_job_leases_holder_idx ON scheduler_job_leases (holder);
CREATE INDEX scheduler_job_leases_runner_idx ON scheduler_job_leases (runner_id) WHERE runner_id IS NOT NULL;
CREATE INDEX scheduler_job_leases_expiry_idx ON scheduler_job_leases (expires_at);
CREATE INDEX scheduler_job_leases_request_idx ON scheduler_job_leases (runner_id, request_id) WHERE request_id IS NOT NULL;

CREATE TABLE scheduler_done (
  step_id  bigint NOT NULL,
  attempt  integer NOT NULL,
  done_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (step_id, attempt)
);
CREATE INDEX scheduler_done_at_idx ON scheduler_done (done_at);

CREATE TABLE scheduler_run_pins (
  run_id     bigint PRIMARY KEY,
  runner_id  text NOT NULL,
  pinned_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE pool_limits (
  name        text PRIMARY KEY,
  max_holders integer NOT NULL CHECK (max_holders >= 0),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE pool_holds (
  pool     text NOT NULL,
  step_id  bigint NOT NULL,
  attempt  integer NOT NULL,
  held_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (pool, step_id)
);
CREATE INDEX pool_holds_step_idx ON pool_holds (step_id);

-- The fleet registry.
CREATE TABLE runner_groups (
  name        text PRIMARY KEY,
  attributes  jsonb NOT NULL DEFAULT '{}'::jsonb,
  exclusive   boolean NOT NULL DEFAULT false,
  drained     boolean NOT NULL DEFAULT false,
  drain_reason text,
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE runners (
  id                  text PRIMARY KEY,
  name                text NOT NULL,
  group_name          text,
  labels              text[] NOT NULL DEFAULT '{}',
  executors           text[] NOT NULL DEFAULT '{shell}',
  max_load            real NOT NULL DEFAULT 1,
  max_parallel_steps  integer NOT NULL DEFAULT 1,
  site                text,
  protocol_version    integer NOT NULL DEFAULT 1,
  credential_hash     text NOT NULL UNIQUE,
  registered_at       timestamptz NOT NULL DEFAULT now(),
  last_seen_at        timestamptz NOT NULL DEFAULT now(),
  last_replica        text,
  state               text NOT NULL DEFAULT 'online' CHECK (state IN ('online', 'watch', 'offline')),
  drained             boolean NOT NULL DEFAULT false,
  drain_reason        text,
  deleted_at          timestamptz
);

-- Classification inputs.
CREATE TABLE projects (
  name    text PRIMARY KEY,
  weight  real NOT NULL DEFAULT 1 CHECK (weight > 0)
);
CREATE TABLE placement_bindings (
  path         text PRIMARY KEY,
  requirement  jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);
