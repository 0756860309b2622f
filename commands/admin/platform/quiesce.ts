import { PostureLeverCommand } from '../../../src/cli/posture-command.js';

export default class AdminPlatformQuiesce extends PostureLeverCommand {
  static override description =
    'System quiesce: no replica hands out new offers, but unlike a halt the lease expiry sweep keeps running, so a runner that dies meanwhile still fails as runner_lost. Steps already running continue, renew and complete. The platform\'s own hold: lifted by `admin platform resume`, independent of the fleet quiesce. Durable and seen by every replica within a tick. Idempotent; --until lifts it automatically (the leader does, audited).';
  static override examples = ['<%= config.bin %> admin platform quiesce --reason "store upgrade" --until 30m', '<%= config.bin %> admin platform quiesce --json'];
  static override summary = 'Hold all new offers, expiry keeps running';
  protected readonly verb = 'platformQuiesce';
  protected readonly already = 'already quiesced';
  protected readonly done = 'system quiesced: no new offers, expiry sweep running';
}
