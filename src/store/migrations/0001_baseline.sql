-- The schema of the first release, in one file. Migrations after it are numbered 0002, 0003, …
-- without gaps, forward-only, never edited once released. A store made before this baseline (by
-- a pre-release chain) is adopted or refused by src/store/pre-release.ts.

-- Membership: one row per replica boot.
CREATE TABLE replicas (
  id            text PRIMARY KEY,
  host          text NOT NULL,
  site          text,
  version       text NOT NULL,
  http_address  text,
  started_at    timestamptz NOT NULL DEFAULT now(),
  heartbeat_at  timestamptz NOT NULL DEFAULT now(),
  quiesced      boolean NOT NULL DEFAULT false,
  stopped_at    timestamptz
);
CREATE INDEX replicas_heartbeat_idx ON replicas (heartbeat_at);

-- Named leases: shard:0 .. shard:63 and leader. Judged by the database clock only.
CREATE TABLE coordination_leases (
  name        text PRIMARY KEY,
  holder      text NOT NULL,
  token       bigint NOT NULL,
  acquired_at timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL
);
CREATE SEQUENCE coordination_token_seq;

-- The one durable posture row every replica reads. system_quiesced is the platform's own hold on
-- offers, lifted independently of the fleet quiesce.
CREATE TABLE fleet_posture (
  id               boolean PRIMARY KEY DEFAULT true CHECK (id),
  quiesced         boolean NOT NULL DEFAULT false,
  halted           boolean NOT NULL DEFAULT false,
  reason           text,
  actor            text,
  since            timestamptz NOT NULL DEFAULT now(),
  system_quiesced  boolean NOT NULL DEFAULT false
);
INSERT INTO fleet_posture (id) VALUES (true);

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

CREATE TABLE audit_log (
  id      bigserial PRIMARY KEY,
  at      timestamptz NOT NULL DEFAULT now(),
  actor   text NOT NULL,
  action  text NOT NULL,
  target  text,
  source  text,
  detail  jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX audit_log_at_idx ON audit_log (at DESC);
-- `admin audit --actor A` reads one actor's levers newest first.
CREATE INDEX audit_log_actor_idx ON audit_log (actor, at DESC);

-- Admin and runner-registration tokens; only a SHA-256 of the secret is kept. API tokens carry a
-- scope (read ⊂ runs, levers ⊂ admin). A registration token names the runner groups it may
-- register into; one that names none (NULL) may join only groups that are not exclusive: an
-- exclusive group is a trust boundary, and joining it takes a token issued for it.
CREATE TABLE tokens (
  id            text PRIMARY KEY,
  kind          text NOT NULL CHECK (kind IN ('admin', 'registration')),
  name          text NOT NULL,
  hash          text NOT NULL UNIQUE,
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz,
  scope         text CHECK (scope IN ('read', 'runs', 'levers', 'admin')),
  created_by    text,
  expires_at    timestamptz,
  groups        text[],
  CONSTRAINT tokens_scope_for_admin CHECK ((kind = 'admin') = (scope IS NOT NULL)),
  CONSTRAINT tokens_groups_for_registration CHECK (groups IS NULL OR (kind = 'registration' AND cardinality(groups) > 0))
);

-- Orchestration state. Run progress is kept as counters, so a completion never re-reads (or
-- waits on) its run: open_steps counts steps pending, ready or running (the run finishes at zero).
-- A run's row is updated once per group of its steps that finish and once more when it finishes;
-- with half a page free it stays in place (HOT) and only the finish writes index entries.
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
  finished_at         timestamptz,
  open_steps          integer NOT NULL DEFAULT 0,
  template_name       text,
  template_version    integer,
  trigger_id          bigint,
  trigger_payload     text
) WITH (fillfactor = 50);
CREATE INDEX runs_created_idx ON runs (created_at DESC, id DESC);
CREATE INDEX runs_status_idx ON runs (status, created_at DESC);
-- Retention finds finished runs oldest first without reading the running ones.
CREATE INDEX runs_finished_idx ON runs (finished_at, id) WHERE finished_at IS NOT NULL;

-- unmet_needs: needs of a pending step not yet succeeded (it becomes ready at zero); dependents:
-- how many steps of the run need this one (0: its success frees nothing). needs and pools are NULL
-- rather than empty (13 B each saved): readers map NULL to an empty list, and `name = ANY(needs)`
-- is never true for it. log_bytes counts the output the current attempt (log_attempt) has stored,
-- so the per-step cap is checked by the UPDATE that counts a batch. start_log_id is the id
-- reserved from step_logs' sequence for the line "attempt N started on runner R", read from the
-- step and written under that id only when the attempt's start is about to be forgotten.
-- A step's attempt writes two new versions of its row before pruning can be counted on to reclaim
-- the first: with two thirds of each page free both fit beside it, and every update stays HOT.
CREATE TABLE steps (
  id           bigserial PRIMARY KEY,
  run_id       bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  name         text NOT NULL,
  command      text NOT NULL,
  needs        text[] DEFAULT '{}',
  env          jsonb NOT NULL DEFAULT '{}'::jsonb,
  timeout_ms   integer,
  placement    jsonb,
  pools        text[] DEFAULT '{}',
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
  log_bytes    bigint NOT NULL DEFAULT 0,
  log_attempt  integer NOT NULL DEFAULT 0,
  unmet_needs  integer NOT NULL DEFAULT 0,
  dependents   integer NOT NULL DEFAULT 0,
  start_log_id bigint,
  UNIQUE (run_id, name)
) WITH (fillfactor = 33);

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
-- pools is NULL for most steps (a bit in the null bitmap instead of 13 B); enqueued_at is read by
-- nothing and left NULL. Entries no runner can take now (a pool at its limit, a placement no
-- runner satisfies, a drained group, a pinned runner that is busy) are set aside out of the claim
-- path, keyed by what would change it (blocked_on), so they never hide an entry behind them that
-- an idle runner could take: the claim's partial indexes hold the claimable entries alone, and a
-- second small index holds the blocked ones by key; a reader wanting the whole queue in order
-- merges the two. There is no index by run (its few readers reach entries through the run's steps)
-- nor by ready_at (the aged any-shard lane reads the head of each lane instead).
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
  pools         text[] DEFAULT '{}',
  requirement   jsonb,
  load          real NOT NULL DEFAULT 1,
  run_scope     boolean NOT NULL DEFAULT false,
  max_parallel  integer NOT NULL DEFAULT 1,
  site_stamp    text,
  ready_at      timestamptz NOT NULL DEFAULT now(),
  enqueued_at   timestamptz,
  position      bigint NOT NULL DEFAULT nextval('queue_position_seq'),
  blocked_on    text,
  blocked_at    timestamptz
);
CREATE INDEX queue_ready_shard_order_idx ON queue_ready (shard, lane, position) WHERE blocked_on IS NULL;
CREATE INDEX queue_ready_order_idx ON queue_ready (lane, position) WHERE blocked_on IS NULL;
CREATE INDEX queue_ready_site_idx ON queue_ready (site_stamp, lane, position) WHERE site_stamp IS NOT NULL AND blocked_on IS NULL;
-- Keyed: the check after a run's step ends reads that run's blocked entries alone.
CREATE INDEX queue_ready_blocked_idx ON queue_ready (blocked_on, lane, position) WHERE blocked_on IS NOT NULL;

-- Live leases: the entry as it was claimed, plus who holds it and where it stands. A retried
-- acquire finds the offers it was handed by runner and request_key, a 64-bit digest of the
-- runner's request id (hashtextextended), through the runner index. request_id and enqueued_at
-- are written by nothing. The expiry sweep scans this small table (only the work out on runners),
-- so expires_at has no index and every renewal is an in-place (HOT) update.
CREATE SEQUENCE lease_token_seq;
CREATE TABLE step_leases (
  step_id       bigint PRIMARY KEY,
  run_id        bigint NOT NULL,
  shard         smallint NOT NULL,
  attempt       integer NOT NULL,
  priority      smallint NOT NULL DEFAULT 0,
  lane          smallint NOT NULL DEFAULT 2,
  fair_key      text NOT NULL DEFAULT 'default',
  weight        real NOT NULL DEFAULT 1,
  pools         text[] DEFAULT '{}',
  requirement   jsonb,
  load          real NOT NULL DEFAULT 1,
  run_scope     boolean NOT NULL DEFAULT false,
  max_parallel  integer NOT NULL DEFAULT 1,
  site_stamp    text,
  ready_at      timestamptz NOT NULL,
  enqueued_at   timestamptz,
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
  executing     boolean NOT NULL DEFAULT false,
  request_key   bigint
) WITH (fillfactor = 80);
CREATE INDEX step_leases_runner_idx ON step_leases (runner_id) WHERE runner_id IS NOT NULL;
-- Delivered leases past their ack deadline are found by index, at any size.
CREATE INDEX step_leases_ack_idx ON step_leases (ack_deadline) WHERE acked_at IS NULL AND ack_deadline IS NOT NULL;

-- Completed (step, attempt)s: enqueue is idempotent by them, and a completion remembers which
-- token completed it, so a repeat of the same completion answers ok while any other token is
-- fenced. Retention deletes them by age; they are appended in done_at order, so a block range
-- index answers it at a fraction of a b-tree's per-step insert cost.
CREATE TABLE completed_attempts (
  step_id    bigint NOT NULL,
  attempt    integer NOT NULL,
  done_at    timestamptz NOT NULL DEFAULT now(),
  token      bigint,
  runner_id  text,
  PRIMARY KEY (step_id, attempt)
);
CREATE INDEX completed_attempts_at_brin ON completed_attempts USING brin (done_at);

CREATE TABLE run_pins (
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

-- registration_token_id: which registration token a runner registered with, so revoking it can
-- revoke its runners too.
CREATE TABLE runners (
  id                     text PRIMARY KEY,
  name                   text NOT NULL,
  group_name             text,
  labels                 text[] NOT NULL DEFAULT '{}',
  executors              text[] NOT NULL DEFAULT '{shell}',
  max_load               real NOT NULL DEFAULT 1,
  max_parallel_steps     integer NOT NULL DEFAULT 1,
  site                   text,
  protocol_version       integer NOT NULL DEFAULT 1,
  credential_hash        text NOT NULL UNIQUE,
  registered_at          timestamptz NOT NULL DEFAULT now(),
  last_seen_at           timestamptz NOT NULL DEFAULT now(),
  last_replica           text,
  state                  text NOT NULL DEFAULT 'online' CHECK (state IN ('online', 'watch', 'offline')),
  drained                boolean NOT NULL DEFAULT false,
  drain_reason           text,
  deleted_at             timestamptz,
  registration_token_id  text
);
CREATE INDEX runners_credential_idx ON runners (credential_hash) WHERE deleted_at IS NULL;
CREATE INDEX runners_registration_token_idx ON runners (registration_token_id) WHERE deleted_at IS NULL;

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
-- A webhook's secret is a credential minted by whoever created it: when an API token created it
-- (owner_token_id), the webhook answers only while that token is live, so a credential never
-- outlives the token that minted it. NULL: created with the store's own URL, owned by no token.
CREATE TABLE webhooks (
  id              bigint PRIMARY KEY DEFAULT nextval('trigger_id_seq'),
  template        text NOT NULL,
  secret          text NOT NULL,
  sets            jsonb NOT NULL DEFAULT '[]'::jsonb,
  maps            jsonb NOT NULL DEFAULT '[]'::jsonb,
  enabled         boolean NOT NULL DEFAULT true,
  created_by      text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  owner_token_id  text
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

-- Runs started from a template or a trigger: the per-template concurrency cap and daily ceiling
-- count them through these partial indexes.
CREATE INDEX runs_template_running_idx ON runs (template_name) WHERE status = 'running' AND template_name IS NOT NULL;
CREATE INDEX runs_template_created_idx ON runs (template_name, created_at) WHERE template_name IS NOT NULL;
CREATE INDEX runs_trigger_running_idx ON runs (trigger_id) WHERE status = 'running' AND trigger_id IS NOT NULL;

-- The shard of a run in SQL, so a submit can take its run ids from the sequence and queue the
-- run's steps in the same statement. It is src/core/fnv.ts's shardOf: the 32-bit FNV-1a of the
-- id's decimal digits, modulo the 64 shards. Modulo 64 only the hash's low six bits count, and
-- those depend only on the low six bits of each step's operands (a product's low bits come from
-- its factors' low bits, and xor is bitwise): the offset basis 0x811c9dc5 is 5 there and the
-- prime 0x01000193 is 19. test/store/run-shard.test.ts holds the two definitions together.
CREATE FUNCTION run_shard(id bigint) RETURNS smallint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  digits text := id::text;
  h int := 5;
BEGIN
  FOR i IN 1 .. length(digits) LOOP
    h := ((h # (ascii(substr(digits, i, 1)) & 63)) * 19) & 63;
  END LOOP;
  RETURN h;
END
$$;
