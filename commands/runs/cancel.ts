import { Args } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { parseRunId } from '../../src/cli/runs.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class RunsCancel extends OpsCommand<typeof RunsCancel> {
  static override args = { id: Args.string({ description: 'run id', required: true }) };
  static override description = `Cancels a running run: its ready steps leave the queue, its live leases are revoked (the runners kill those steps), every unfinished step is cancelled and the run ends cancelled.

Cancelling a run that has already ended changes nothing and exits 0, naming its final status.`;
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> runs cancel 42'];
  static override summary = 'Cancel a run';

  async run(): Promise<OpsOutput<'runsCancel'>> {
    const id = parseRunId((await this.parse(RunsCancel)).args.id);
    const result = await (await this.ops()).runsCancel({ id });
    if (!this.jsonEnabled()) {
      if (result.cancelled) this.log(`run ${id} cancelled${result.steps.length ? `: ${result.steps.join(', ')}` : ''}${result.revoked ? ` (${result.revoked === 1 ? '1 running step: its lease revoked; its runner is told now and kills the step\'s process group' : `${result.revoked} running steps: their leases revoked; their runners are told now and kill the steps' process groups`})` : ''}`);
      else this.log(`run ${id} already ended: ${result.status}; nothing to cancel`);
    }
    return result;
  }
}
