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

-- Named leases: shard:0 .. shard:63 and cron-leader. Judged by the database clock only.
CREATE TABLE coordination_leases (
  name        text PRIMARY KEY,
  holder      text NOT NULL,
  token       bigint NOT NULL,
  acquired_at timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL
);
CREATE SEQUENCE coordination_token_seq;

-- The one durable posture row every replica reads.
CREATE TABLE fleet_posture (
  id        boolean PRIMARY KEY DEFAULT true CHECK (id),
  quiesced  boolean NOT NULL DEFAULT false,
  halted    boolean NOT NULL DEFAULT false,
  reason    text,
  actor     text,
  since     timestamptz NOT NULL DEFAULT now()
);
INSERT INTO fleet_posture (id) VALUES (true);

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

-- Admin and runner-registration tokens; only a SHA-256 of the secret is kept.
CREATE TABLE tokens (
  id            text PRIMARY KEY,
  kind          text NOT NULL CHECK (kind IN ('admin', 'registration')),
  name          text NOT NULL,
  hash          text NOT NULL UNIQUE,
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz
);
