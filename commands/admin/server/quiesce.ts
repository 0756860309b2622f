import { PostureLeverCommand } from '../../../src/cli/posture-command.js';

export default class AdminServerQuiesce extends PostureLeverCommand {
  static override description = 'Quiesce the fleet: no replica hands out new offers; steps already running continue, renew and complete. Durable, seen by every replica within a tick, survives restarts. Idempotent: pulling it again succeeds and says it already was so. --until lifts it automatically (the leader does, audited).';
  static override examples = ['<%= config.bin %> admin server quiesce --reason "deploying the servers"', '<%= config.bin %> admin server quiesce --json'];
  static override summary = 'Hold offers fleet-wide';
  protected readonly verb = 'serverQuiesce';
  protected readonly already = 'already quiesced';
  protected readonly done = 'fleet quiesced: no new offers';
}
