import { Args } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { table } from '../../src/cli/render.js';
import { parseRunId } from '../../src/cli/runs.js';
import type { OpsOutput } from '../../src/ops/index.js';
import { RUN_TABLE_HEAD, runHeadline, runTraceLine, runTreeRows } from '../../src/views/runs.js';

export default class RunsShow extends OpsCommand<typeof RunsShow> {
  static override args = { id: Args.string({ description: 'run id', required: true }) };
  static override description = 'Shows a run and its steps as a tree in dependency order: status, attempt, runner, duration and cause of each; a queued step says what it waits for. The second line names the run\'s trace id (docs/tracing.md).';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> runs show 42', '<%= config.bin %> runs show 42 --json'];
  static override summary = 'Show a run and its steps';

  async run(): Promise<OpsOutput<'runsShow'>> {
    const id = parseRunId((await this.parse(RunsShow)).args.id);
    const view = await (await this.ops()).runsShow({ id });
    if (!this.jsonEnabled()) {
      this.log(runHeadline(view));
      this.log(runTraceLine(view));
      const t = table(RUN_TABLE_HEAD);
      t.push(...runTreeRows(view));
      this.log(t.toString());
    }
    return view;
  }
}
