import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { describeDrain, describePreview, drainWaitLeases, parseTimeout } from '../../src/cli/drain.js';
import { leaseText, type DrainWaitResult } from '../../src/ops/drain-wait.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class FleetDrain extends OpsCommand<typeof FleetDrain> {
  static override args = { runner: Args.string({ description: 'runner id or (unique) name; or use --group' }) };
  static override description =
    'Drain a runner or a whole group: no new work is matched to it (every replica sees it within a dispatch tick) and its polls are answered empty; work already running continues. Idempotent (a second drain exits 0 and says it was already drained), and recorded in the audit log. --wait returns once the drained runners hold no lease, printing what it waited for (exit 6 if --timeout passes first); --dry-run changes nothing and lists what would be held.';
  static override enableJsonFlag = true;
  static override examples = [
    '<%= config.bin %> fleet drain build-7 --reason "kernel update" --wait --timeout 15m',
    '<%= config.bin %> fleet drain --group prod-runners --dry-run',
  ];
  static override flags = {
    'dry-run': Flags.boolean({ description: 'change nothing: list the leases still out, pinned runs that will wait, and queued entries left with no eligible runner', exclusive: ['wait', 'reason'] }),
    group: Flags.string({ description: 'drain every runner of this group' }),
    reason: Flags.string({ description: 'why, shown by groups list and fleet queue and kept in the audit log' }),
    timeout: Flags.string({ description: 'with --wait: give up (exit 6) after this long [default: 10m]', dependsOn: ['wait'] }),
    wait: Flags.boolean({ description: 'return only once the drained runners hold no lease' }),
  };
  static override summary = 'Drain a runner or a group';

  async run(): Promise<OpsOutput<'fleetDrainPreview'> | (OpsOutput<'fleetDrain'> & { wait?: DrainWaitResult })> {
    const { args } = await this.parse(FleetDrain);
    const target = { runner: args.runner, group: this.flags.group };
    const ops = await this.ops();
    if (this.flags['dry-run']) {
      const preview = await ops.fleetDrainPreview(target);
      if (!this.jsonEnabled()) for (const line of describePreview(preview)) this.log(line);
      return preview;
    }
    const timeoutMs = this.flags.wait ? parseTimeout(this.flags.timeout) : 0;
    const r = await ops.fleetDrain({ ...target, reason: this.flags.reason });
    if (!this.jsonEnabled()) this.log(describeDrain(r));
    if (!this.flags.wait) return r;
    const human = !this.jsonEnabled();
    const wait = await drainWaitLeases(ops, {
      ...target,
      timeoutMs,
      onChange: (still, finished) => {
        if (!human) return;
        for (const l of finished) this.log(`finished: ${leaseText(l)}`);
        if (still.length > 0) this.log(`waiting for ${still.length} lease${still.length === 1 ? '' : 's'}: ${still.map(leaseText).join('; ')}`);
      },
    });
    if (human) {
      const n = wait.waitedFor.length;
      this.log(n === 0 ? 'no lease held: nothing to wait for' : `no lease held: waited ${(wait.waitedMs / 1000).toFixed(1)}s for ${n} lease${n === 1 ? '' : 's'}`);
    }
    return { ...r, wait };
  }
}
