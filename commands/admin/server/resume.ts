import { Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base.js';
import { fleetPostureLever, type PostureLeverResult } from '../../../src/dispatch/postures.js';

export default class AdminServerResume extends BaseCommand<typeof AdminServerResume> {
  static override description = 'Lift the fleet quiesce: offers flow again on the next dispatch tick. Idempotent: pulling it again succeeds and changes nothing.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin server resume --reason "deploy done"', '<%= config.bin %> admin server resume --json'];
  static override flags = {
    reason: Flags.string({ description: 'why, recorded on the posture row and in the audit log' }),
  };
  static override summary = 'Lift a fleet quiesce';

  async run(): Promise<PostureLeverResult> {
    const result = await fleetPostureLever(await this.store(), { field: 'quiesced', value: false, reason: this.flags.reason, actor: process.env.USER ? `cli:${process.env.USER}` : 'cli', source: 'cli' });
    if (!this.jsonEnabled()) this.log(result.changed ? 'fleet resumed: offers flow again' : 'already so: nothing changed');
    return result;
  }
}
