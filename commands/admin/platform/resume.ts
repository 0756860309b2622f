import { PostureLeverCommand } from '../../../src/cli/posture-command.js';

export default class AdminPlatformResume extends PostureLeverCommand {
  static override description =
    'Lift the platform postures (emergency halt and system quiesce): dispatch resumes on the next tick, and after a halt the first expiry sweep reconciles leases that died during it. Leaves a fleet quiesce in force (`fleet resume` lifts that). Idempotent: pulling it again succeeds and says it already was so.';
  static override examples = ['<%= config.bin %> admin platform resume --reason "failover done"', '<%= config.bin %> admin platform resume --json'];
  static override summary = 'Lift an emergency halt or a system quiesce';
  protected readonly verb = 'platformResume';
  protected readonly already = 'platform not halted or quiesced';
  protected readonly done = 'platform resumed';
}
