import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { describeDrain, drainLever } from '../../src/cli/drain.js';
import type { DrainResult } from '../../src/store/fleet.js';

export default class FleetDrain extends BaseCommand<typeof FleetDrain> {
  static override args = { runner: Args.string({ description: 'runner id or (unique) name; or use --group' }) };
  static override description =
    'Drain a runner or a whole group: no new work is matched to it (every replica sees it within a dispatch tick) and its polls are answered empty; work already running continues. Idempotent, and recorded in the audit log.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> fleet drain build-7 --reason "kernel update"', '<%= config.bin %> fleet drain --group prod-runners'];
  static override flags = {
    group: Flags.string({ description: 'drain every runner of this group' }),
    reason: Flags.string({ description: 'why, shown by groups list and fleet queue' }),
  };
  static override summary = 'Drain a runner or a group';

  async run(): Promise<DrainResult> {
    const { args } = await this.parse(FleetDrain);
    const r = await drainLever(await this.store(), { runner: args.runner, group: this.flags.group, drained: true, reason: this.flags.reason });
    if (!this.jsonEnabled()) this.log(describeDrain(r));
    return r;
  }
}
