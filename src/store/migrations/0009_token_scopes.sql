-- API tokens carry a scope (read ⊂ runs, levers ⊂ admin), who created them and when they expire.
-- Tokens issued before scopes existed were full admin tokens and stay so.
ALTER TABLE tokens ADD COLUMN scope text CHECK (scope IN ('read', 'runs', 'levers', 'admin'));
UPDATE tokens SET scope = 'admin' WHERE kind = 'admin';
ALTER TABLE tokens ADD CONSTRAINT tokens_scope_for_admin CHECK ((kind = 'admin') = (scope IS NOT NULL));
ALTER TABLE tokens ADD COLUMN created_by text;
ALTER TABLE tokens ADD COLUMN expires_at timestamptz;

-- Which registration token a runner registered with, so revoking it can revoke its runners too.
ALTER TABLE runners ADD COLUMN registration_token_id text;
CREATE INDEX runners_registration_token_idx ON runners (registration_token_id) WHERE deleted_at IS NULL;
