import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { describeDrain } from '../../src/cli/drain.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class FleetUndrain extends OpsCommand<typeof FleetUndrain> {
  static override args = { runner: Args.string({ description: 'runner id or (unique) name; or use --group' }) };
  static override description = 'Lift a drain from a runner or a group; its next poll gets work again. Idempotent, and recorded in the audit log.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> fleet undrain build-7', '<%= config.bin %> fleet undrain --group prod-runners'];
  static override flags = {
    group: Flags.string({ description: 'undrain this group' }),
    reason: Flags.string({ description: 'why, for the audit log' }),
  };
  static override summary = 'Undrain a runner or a group';

  async run(): Promise<OpsOutput<'fleetUndrain'>> {
    const { args } = await this.parse(FleetUndrain);
    const r = await (await this.ops()).fleetUndrain({ runner: args.runner, group: this.flags.group, reason: this.flags.reason });
    if (!this.jsonEnabled()) this.log(describeDrain(r));
    return r;
  }
}
