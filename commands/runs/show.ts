import { Args } from '@oclif/core';
import Table from 'cli-table3';
import { BaseCommand } from '../../src/cli/base.js';
import { parseRunId } from '../../src/cli/runs.js';
import { queuedStepVerdicts } from '../../src/dispatch/queued-verdicts.js';
import { runSnapshot } from '../../src/orchestrator/follow.js';
import { RUN_TABLE_HEAD, runHeadline, runTreeRows, runView, type RunView } from '../../src/views/runs.js';

export default class RunsShow extends BaseCommand<typeof RunsShow> {
  static override args = { id: Args.string({ description: 'run id', required: true }) };
  static override description = 'Shows a run and its steps as a tree in dependency order: status, attempt, runner, duration and cause of each; a queued step says what it waits for.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> runs show 42', '<%= config.bin %> runs show 42 --json'];
  static override summary = 'Show a run and its steps';

  async run(): Promise<RunView> {
    const id = parseRunId((await this.parse(RunsShow)).args.id);
    const pool = await this.store();
    const snap = await runSnapshot(pool, id);
    const view = runView(snap.run, snap.steps, snap.now, await queuedStepVerdicts(pool, snap));
    if (!this.jsonEnabled()) {
      this.log(runHeadline(view));
      const table = new Table({ head: RUN_TABLE_HEAD });
      table.push(...runTreeRows(view));
      this.log(table.toString());
    }
    return view;
  }
}
