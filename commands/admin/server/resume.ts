import { PostureLeverCommand } from '../../../src/cli/posture-command.js';

export default class AdminServerResume extends PostureLeverCommand {
  static override description = 'Lift the fleet quiesce: offers flow again on the next dispatch tick. Idempotent: pulling it again succeeds and changes nothing.';
  static override examples = ['<%= config.bin %> admin server resume --reason "deploy done"', '<%= config.bin %> admin server resume --json'];
  static override summary = 'Lift a fleet quiesce';
  protected readonly field = 'quiesced';
  protected readonly value = false;
  protected readonly done = 'fleet resumed: offers flow again';
}
