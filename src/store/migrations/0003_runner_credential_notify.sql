-- Replicas cache runner credentials (src/api/runner-credentials.ts). Whatever retires a runner
-- (removed, retired by a re-registration, its registration token revoked, the row deleted) or
-- changes what a cached row answers (its drain), in any process, notifies the runner's id at
-- commit, so every replica forgets it at once. A trigger, so no write path can forget to notify.
CREATE FUNCTION runner_credentials_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('opschain_runner_credentials', OLD.id);
  RETURN NULL;
END $$;

CREATE TRIGGER runner_credentials_changed
  AFTER UPDATE OF deleted_at, drained, credential_hash ON runners
  FOR EACH ROW
  WHEN (OLD.deleted_at IS DISTINCT FROM NEW.deleted_at OR OLD.drained IS DISTINCT FROM NEW.drained OR OLD.credential_hash IS DISTINCT FROM NEW.credential_hash)
  EXECUTE FUNCTION runner_credentials_notify();

CREATE TRIGGER runner_credentials_deleted
  AFTER DELETE ON runners
  FOR EACH ROW
  EXECUTE FUNCTION runner_credentials_notify();
