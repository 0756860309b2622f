import { Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base.js';
import { fleetPostureLever, type PostureLeverResult } from '../../../src/dispatch/postures.js';

export default class AdminPlatformResume extends BaseCommand<typeof AdminPlatformResume> {
  static override description = 'Lift the emergency halt: dispatch resumes and the first expiry sweep reconciles leases that died during the halt. Idempotent: pulling it again succeeds and changes nothing.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin platform resume --reason "failover done"', '<%= config.bin %> admin platform resume --json'];
  static override flags = {
    reason: Flags.string({ description: 'why, recorded on the posture row and in the audit log' }),
  };
  static override summary = 'Lift an emergency halt';

  async run(): Promise<PostureLeverResult> {
    const result = await fleetPostureLever(await this.store(), { field: 'halted', value: false, reason: this.flags.reason, actor: process.env.USER ? `cli:${process.env.USER}` : 'cli', source: 'cli' });
    if (!this.jsonEnabled()) this.log(result.changed ? 'platform resumed' : 'already so: nothing changed');
    return result;
  }
}
