import { PostureLeverCommand } from '../../src/cli/posture-command.js';

export default class FleetResume extends PostureLeverCommand {
  // The command's first name, kept so scripts written against it keep working (docs/levers.md).
  static override aliases = ['admin:server:resume'];
  static override deprecateAliases = true;
  static override description = 'Lift the fleet quiesce: offers flow again on the next dispatch tick. Idempotent: pulling it again succeeds and says it already was so. --until lifts it automatically (the leader does, audited). `admin server resume` is its deprecated former name.';
  static override examples = ['<%= config.bin %> fleet resume --reason "deploy done"', '<%= config.bin %> fleet resume --json'];
  static override summary = 'Lift a fleet quiesce';
  protected readonly verb = 'fleetResume';
  protected readonly already = 'not quiesced';
  protected readonly done = 'fleet resumed: offers flow again';
}
