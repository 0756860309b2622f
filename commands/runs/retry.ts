import { Args } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { parseRunId } from '../../src/cli/runs.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class RunsRetry extends OpsCommand<typeof RunsRetry> {
  static override args = { id: Args.string({ description: 'run id', required: true }) };
  static override description = `Every failed or system_error step of the run re-enters the queue as a new attempt; skipped and cancelled steps go back to pending and follow once what they need succeeds, and the run is running again.

A run with no failed or cancelled step is left as it is (exit 0, nothing retried), so retrying twice is the same as retrying once.`;
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> runs retry 42'];
  static override summary = "Retry a run's failed steps";

  async run(): Promise<OpsOutput<'runsRetry'>> {
    const id = parseRunId((await this.parse(RunsRetry)).args.id);
    const result = await (await this.ops()).runsRetry({ id });
    if (!this.jsonEnabled()) {
      if (result.retried.length === 0 && result.reopened.length === 0) this.log(`run ${id} has no failed steps; nothing to retry (${result.status})`);
      else this.log(`run ${id} running again: ${result.retried.map((s) => `${s.name} (attempt ${s.attempt})`).join(', ')}${result.reopened.length ? `; then ${result.reopened.join(', ')}` : ''}`);
    }
    return result;
  }
}
