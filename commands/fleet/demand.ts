import { Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { table } from '../../src/cli/render.js';
import { repeatRead } from '../../src/cli/repeat.js';
import type { OpsOutput } from '../../src/ops/index.js';
import { FLEET_DEMAND_HEAD, fleetDemandRows } from '../../src/views/fleet-demand.js';

type View = OpsOutput<'fleetDemand'>;

function render(view: View): string {
  const lines: string[] = [];
  const p = view.posture;
  if (p.halted || p.systemQuiesced || p.fleetQuiesced) lines.push(`${p.halted ? 'PLATFORM HALTED' : p.systemQuiesced ? 'SYSTEM QUIESCED' : 'FLEET QUIESCED'}${p.reason ? `: ${p.reason}` : ''}`);
  const t = table(FLEET_DEMAND_HEAD);
  for (const row of fleetDemandRows(view)) t.push(row);
  lines.push(t.toString());
  lines.push(`capacity: entries more runners of that group would start now; blocked: held by what runners cannot fix (docs/autoscaling.md)`);
  return lines.join('\n');
}

export default class FleetDemand extends OpsCommand<typeof FleetDemand> {
  static override description =
    'Per runner group: ready entries waiting only for capacity (every runner their placement matches is full; more runners of that group would start them: the autoscaling signal), entries held by what runners cannot fix (pool at its limit, fleet posture, pinned runner, run cap, no runner shape matches, every match drained, offline or silent), entries starting on the next tick, leased and running steps, idle/busy/drained/offline runners and the oldest capacity-bound wait. An entry some runners of two groups match counts in both rows; the total counts it once. docs/autoscaling.md defines every number.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> fleet demand', '<%= config.bin %> fleet demand --group build --json | jq \'.groups[0].capacity\'', '<%= config.bin %> fleet demand --watch'];
  static override flags = {
    'accept-exceeding': Flags.boolean({ description: 'judge oversized steps as the servers do (their dispatch.accept_exceeding)', allowNo: true, default: true, env: 'OPSCHAIN_ACCEPT_EXCEEDING' }),
    group: Flags.string({ description: 'only this group\'s row ((none): runners with no group, (unmatched): work no runner matches)' }),
    watch: Flags.boolean({ description: 'read again every 2 s: a refreshed table on a terminal, one NDJSON line per read with --json or when piped', default: false }),
  };
  static override summary = 'Per group: work waiting for capacity, work blocked otherwise, runner states, oldest wait';

  async run(): Promise<View> {
    const ops = await this.ops();
    const read = () => ops.fleetDemand({ group: this.flags.group, acceptExceeding: this.flags['accept-exceeding'] });
    if (this.flags.watch) {
      const stop = new AbortController();
      process.once('SIGINT', () => stop.abort());
      await repeatRead({ intervalMs: 2000, read, render, json: this.jsonEnabled() || !process.stdout.isTTY, signal: stop.signal });
      this.exit(0);
    }
    const view = await read();
    if (!this.jsonEnabled()) this.log(render(view));
    return view;
  }
}
