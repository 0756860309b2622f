-- Every dispatcher listens on the queue channel. A posture that changes (a lever on any replica,
-- the CLI straight to the store, the leader lifting one whose --until passed) and a runner or a
-- group drained or undrained notify it at commit, so each replica answers at once the parked polls
-- the change now holds and plans again at once for those it frees (src/dispatch/lever-notices.ts).
-- Triggers, so no writer can forget to notify. Payloads (src/store/lever-notices.ts):
--   posture:FLAG,FLAG   the posture flags in force once the transaction commits (none: offers flow)
--   drain:runner:on:ID  drain:runner:off:ID  drain:group:on:NAME  drain:group:off:NAME

-- Deferred to commit, and reading the row then: a transaction that sets several flags (platform
-- resume lifts two) announces the state it commits, never a state in between.
CREATE FUNCTION fleet_posture_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('opschain_queue', 'posture:' || concat_ws(',',
            CASE WHEN p.halted THEN 'halted' END,
            CASE WHEN p.system_quiesced THEN 'system_quiesced' END,
            CASE WHEN p.quiesced THEN 'quiesced' END))
     FROM (SELECT 1) one LEFT JOIN fleet_posture p ON p.id;
  RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER fleet_posture_inserted
  AFTER INSERT OR DELETE ON fleet_posture
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW
  EXECUTE FUNCTION fleet_posture_notify();

CREATE CONSTRAINT TRIGGER fleet_posture_changed
  AFTER UPDATE OF quiesced, halted, system_quiesced ON fleet_posture
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW
  WHEN (OLD.quiesced IS DISTINCT FROM NEW.quiesced OR OLD.halted IS DISTINCT FROM NEW.halted OR OLD.system_quiesced IS DISTINCT FROM NEW.system_quiesced)
  EXECUTE FUNCTION fleet_posture_notify();

CREATE FUNCTION runner_drain_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('opschain_queue', 'drain:runner:' || CASE WHEN NEW.drained THEN 'on' ELSE 'off' END || ':' || NEW.id);
  RETURN NULL;
END $$;

CREATE TRIGGER runner_drain_changed
  AFTER UPDATE OF drained ON runners
  FOR EACH ROW
  WHEN (OLD.drained IS DISTINCT FROM NEW.drained)
  EXECUTE FUNCTION runner_drain_notify();

-- A group's row deleted while drained lifts its drain.
CREATE FUNCTION runner_group_drain_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM pg_notify('opschain_queue', 'drain:group:off:' || OLD.name);
  ELSE
    PERFORM pg_notify('opschain_queue', 'drain:group:' || CASE WHEN NEW.drained THEN 'on' ELSE 'off' END || ':' || NEW.name);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER runner_group_drained
  AFTER INSERT ON runner_groups
  FOR EACH ROW
  WHEN (NEW.drained)
  EXECUTE FUNCTION runner_group_drain_notify();

CREATE TRIGGER runner_group_drain_changed
  AFTER UPDATE OF drained ON runner_groups
  FOR EACH ROW
  WHEN (OLD.drained IS DISTINCT FROM NEW.drained)
  EXECUTE FUNCTION runner_group_drain_notify();

CREATE TRIGGER runner_group_deleted
  AFTER DELETE ON runner_groups
  FOR EACH ROW
  WHEN (OLD.drained)
  EXECUTE FUNCTION runner_group_drain_notify();
