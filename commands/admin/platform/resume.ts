import { PostureLeverCommand } from '../../../src/cli/posture-command.js';

export default class AdminPlatformResume extends PostureLeverCommand {
  static override description = 'Lift the emergency halt: dispatch resumes and the first expiry sweep reconciles leases that died during the halt. Idempotent: pulling it again succeeds and changes nothing.';
  static override examples = ['<%= config.bin %> admin platform resume --reason "failover done"', '<%= config.bin %> admin platform resume --json'];
  static override summary = 'Lift an emergency halt';
  protected readonly field = 'halted';
  protected readonly value = false;
  protected readonly done = 'platform resumed';
}
