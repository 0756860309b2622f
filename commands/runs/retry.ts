import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { parseTimeout } from '../../src/cli/drain.js';
import { EXIT } from '../../src/cli/errors.js';
import { parseRunId, runOutcomeLines, waitForRun } from '../../src/cli/runs.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class RunsRetry extends OpsCommand<typeof RunsRetry> {
  static override args = { id: Args.string({ description: 'run id', required: true }) };
  static override description = `Every failed or system_error step of the run re-enters the queue as a new attempt; skipped and cancelled steps go back to pending and follow once what they need succeeds, and the run is running again.

A run with no failed or cancelled step is left as it is (exit 0, nothing retried), so retrying twice is the same as retrying once.

With --wait, follows the run until it ends, as \`runs submit --wait\` does: step progress on stderr, exit 0 only if it succeeded (1 otherwise), exit 6 when --timeout passes first (the run goes on).`;
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> runs retry 42', '<%= config.bin %> runs retry 42 --wait --timeout 30m'];
  static override flags = {
    timeout: Flags.string({ description: 'with --wait: give up (exit 6) after this long; the run goes on [default: no limit]', dependsOn: ['wait'] }),
    wait: Flags.boolean({ description: 'follow the run until it ends; exit 0 only if it succeeded' }),
  };
  static override summary = "Retry a run's failed steps";

  async run(): Promise<OpsOutput<'runsRetry'> & { run?: OpsOutput<'runsShow'> }> {
    const id = parseRunId((await this.parse(RunsRetry)).args.id);
    const timeoutMs = this.flags.timeout === undefined ? undefined : parseTimeout(this.flags.timeout);
    const ops = await this.ops();
    const result = await ops.runsRetry({ id });
    if (!this.jsonEnabled()) {
      if (result.retried.length === 0 && result.reopened.length === 0) this.log(`run ${id} has no failed steps; nothing to retry (${result.status})`);
      else this.log(`run ${id} running again: ${result.retried.map((s) => `${s.name} (attempt ${s.attempt})`).join(', ')}${result.reopened.length ? `; then ${result.reopened.join(', ')}` : ''}`);
    }
    if (!this.flags.wait) return result;
    const view = await waitForRun(ops, id, { timeoutMs, timeoutText: this.flags.timeout, onLine: this.jsonEnabled() ? undefined : (line) => this.logToStderr(line) });
    if (!this.jsonEnabled()) for (const line of runOutcomeLines(view)) this.logToStderr(line);
    if (view.status !== 'succeeded') {
      if (this.jsonEnabled()) this.logJson({ ...result, run: view });
      this.exit(EXIT.failed);
    }
    return { ...result, run: view };
  }
}
