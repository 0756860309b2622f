import { Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base.js';
import { fleetPostureLever, type PostureLeverResult } from '../../../src/dispatch/postures.js';

export default class AdminPlatformHalt extends BaseCommand<typeof AdminPlatformHalt> {
  static override description = 'Emergency halt: no offers anywhere and the lease expiry sweep is held, so nothing ages into runner_lost; running steps renew by token alone. Durable until resumed. Idempotent: pulling it again succeeds and changes nothing.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin platform halt --reason "database failover"', '<%= config.bin %> admin platform halt --json'];
  static override flags = {
    reason: Flags.string({ description: 'why, recorded on the posture row and in the audit log' }),
  };
  static override summary = 'Emergency halt of all dispatch';

  async run(): Promise<PostureLeverResult> {
    const result = await fleetPostureLever(await this.store(), { field: 'halted', value: true, reason: this.flags.reason, actor: process.env.USER ? `cli:${process.env.USER}` : 'cli', source: 'cli' });
    if (!this.jsonEnabled()) this.log(result.changed ? 'platform halted: no dispatch, expiry held' : 'already so: nothing changed');
    return result;
  }
}
