import { Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base.js';
import { fleetPostureLever, type PostureLeverResult } from '../../../src/dispatch/postures.js';

export default class AdminServerQuiesce extends BaseCommand<typeof AdminServerQuiesce> {
  static override description = 'Quiesce the fleet: no replica hands out new offers; steps already running continue, renew and complete. Durable, seen by every replica within a tick, survives restarts. Idempotent: pulling it again succeeds and changes nothing.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin server quiesce --reason "deploying the servers"', '<%= config.bin %> admin server quiesce --json'];
  static override flags = {
    reason: Flags.string({ description: 'why, recorded on the posture row and in the audit log' }),
  };
  static override summary = 'Hold offers fleet-wide';

  async run(): Promise<PostureLeverResult> {
    const result = await fleetPostureLever(await this.store(), { field: 'quiesced', value: true, reason: this.flags.reason, actor: process.env.USER ? `cli:${process.env.USER}` : 'cli', source: 'cli' });
    if (!this.jsonEnabled()) this.log(result.changed ? 'fleet quiesced: no new offers' : 'already so: nothing changed');
    return result;
  }
}
