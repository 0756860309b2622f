import { PostureLeverCommand } from '../../src/cli/posture-command.js';

export default class FleetQuiesce extends PostureLeverCommand {
  // The command's first name, kept so scripts written against it keep working (docs/levers.md).
  static override aliases = ['admin:server:quiesce'];
  static override deprecateAliases = true;
  static override description = 'Quiesce the fleet: no replica hands out new offers; steps already running continue, renew and complete. Durable, seen by every replica within a tick, survives restarts. Idempotent: pulling it again succeeds and says it already was so. --until lifts it automatically (the leader does, audited). `admin server quiesce` is its deprecated former name.';
  static override examples = ['<%= config.bin %> fleet quiesce --reason "deploying the servers"', '<%= config.bin %> fleet quiesce --json'];
  static override summary = 'Quiesce the fleet: no new offers';
  protected readonly verb = 'fleetQuiesce';
  protected readonly already = 'already quiesced';
  protected readonly done = 'fleet quiesced: no new offers';
}
