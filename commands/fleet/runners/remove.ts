import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../../src/cli/base.js';
import type { OpsOutput } from '../../../src/ops/index.js';

export default class FleetRunnersRemove extends OpsCommand<typeof FleetRunnersRemove> {
  static override args = { runner: Args.string({ description: 'runner id or (unique) name', required: true }) };
  static override description =
    'Remove a runner from the registry and revoke its credential: its next call to any replica gets `credential invalid` and it stops; it leaves placement at once. Leases it still holds end through the expiry sweep (runner_lost), as for any runner that went away; drain it and wait first (`fleet drain RUNNER --wait`) to let its work finish. Audited. To bring the machine back, register it again with a registration token.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> fleet runners remove build-7 --reason "decommissioned"', '<%= config.bin %> fleet runners remove rnr_0a1b2c3d4e5f6a7b --json'];
  static override flags = { reason: Flags.string({ description: 'why, for the audit log' }) };
  static override summary = 'Remove a runner and revoke its credential';

  async run(): Promise<OpsOutput<'fleetRunnersRemove'>> {
    const { args } = await this.parse(FleetRunnersRemove);
    const result = await (await this.ops()).fleetRunnersRemove({ runner: args.runner, reason: this.flags.reason });
    if (!this.jsonEnabled()) for (const r of result.removed) this.log(`removed runner ${r.name} (${r.id}): its credential is refused from its next call`);
    return result;
  }
}
