import { PostureLeverCommand } from '../../../src/cli/posture-command.js';

export default class AdminServerResume extends PostureLeverCommand {
  static override description = 'Lift the fleet quiesce: offers flow again on the next dispatch tick. Idempotent: pulling it again succeeds and says it already was so. --until lifts it automatically (the leader does, audited).';
  static override examples = ['<%= config.bin %> admin server resume --reason "deploy done"', '<%= config.bin %> admin server resume --json'];
  static override summary = 'Lift a fleet quiesce';
  protected readonly verb = 'serverResume';
  protected readonly already = 'not quiesced';
  protected readonly done = 'fleet resumed: offers flow again';
}
