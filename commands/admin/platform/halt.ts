import { PostureLeverCommand } from '../../../src/cli/posture-command.js';

export default class AdminPlatformHalt extends PostureLeverCommand {
  static override description = 'Emergency halt: no offers anywhere and the lease expiry sweep is held, so nothing ages into runner_lost; running steps renew by token alone. Durable until resumed. Idempotent: pulling it again succeeds and says it already was so. --until lifts it automatically (the leader does, audited).';
  static override examples = ['<%= config.bin %> admin platform halt --reason "database failover"', '<%= config.bin %> admin platform halt --json'];
  static override summary = 'Emergency halt of all dispatch';
  protected readonly verb = 'platformHalt';
  protected readonly already = 'already halted';
  protected readonly done = 'platform halted: no dispatch, expiry held';
}
