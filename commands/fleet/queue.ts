import { Flags } from '@oclif/core';
import { table } from '../../src/cli/render.js';
import { OpsCommand } from '../../src/cli/base.js';
import type { OpsOutput } from '../../src/ops/index.js';
import { FLEET_QUEUE_HEAD, fleetQueueRows } from '../../src/views/fleet-queue.js';

export default class FleetQueue extends OpsCommand<typeof FleetQueue> {
  static override description =
    'Every ready and leased entry with its verdict: the first gate holding a ready entry (halted, quiesced, pool full, pinned runner, no runner matches, drained, busy by load, exceeds max load) or "waiting for a dispatch tick". The verdicts are computed by the same code the dispatcher uses; docs/fleet-queue.md lists them.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> fleet queue', '<%= config.bin %> fleet queue --json | jq \'.entries[] | select(.verdict.satisfiable | not)\''];
  static override flags = {
    'accept-exceeding': Flags.boolean({ description: 'judge oversized steps as the servers do (their dispatch.accept_exceeding)', allowNo: true, default: true, env: 'OPSCHAIN_ACCEPT_EXCEEDING' }),
    limit: Flags.integer({ description: 'show at most this many ready entries (the summary counts them all)', default: 1000, min: 1, max: 100_000 }),
  };
  static override summary = 'Why is it waiting: the queue with placement verdicts';

  async run(): Promise<OpsOutput<'fleetQueue'>> {
    const view = await (await this.ops()).fleetQueue({ limit: this.flags.limit, acceptExceeding: this.flags['accept-exceeding'] });
    if (!this.jsonEnabled()) {
      const p = view.posture;
      if (p.halted || p.systemQuiesced || p.fleetQuiesced) this.log(`${p.halted ? 'PLATFORM HALTED' : p.systemQuiesced ? 'SYSTEM QUIESCED' : 'FLEET QUIESCED'}${p.reason ? `: ${p.reason}` : ''}`);
      if (view.entries.length === 0) this.log('queue empty');
      else {
        const t = table(FLEET_QUEUE_HEAD);
        for (const row of fleetQueueRows(view)) t.push(row);
        this.log(t.toString());
      }
      const s = view.summary;
      this.log(`${s.ready} ready${s.readyShown < s.ready ? ` (${s.readyShown} shown)` : ''}, ${s.leased} leased, ${s.unsatisfiable} unsatisfiable`);
    }
    return view;
  }
}
