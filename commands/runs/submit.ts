import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { EXIT } from '../../src/cli/errors.js';
import { table } from '../../src/cli/render.js';
import { followRun } from '../../src/ops/follow.js';
import { runFileRead } from '../../src/orchestrator/runfile.js';
import type { OpsOutput } from '../../src/ops/index.js';
import { RUN_TABLE_HEAD, runHeadline, runTreeRows, stepProgressLine, type StepView } from '../../src/views/runs.js';

export default class RunsSubmit extends OpsCommand<typeof RunsSubmit> {
  static override args = {
    file: Args.string({ description: 'the run file (YAML or JSON); - reads it from stdin', required: true }),
  };
  static override description = `Validates a run file and starts the run; prints its id. A bad file is refused whole, every problem listed with its path (exit 2), and nothing is written.

With --wait, follows the run until it ends, printing each step's progress on stderr, and exits 0 only if it succeeded (1 otherwise).`;
  static override enableJsonFlag = true;
  static override examples = [
    '<%= config.bin %> runs submit examples/hello.yaml',
    '<%= config.bin %> runs submit deploy.yaml --set env.REGION=us-east-1 --set priority=60 --wait',
    'cat run.json | <%= config.bin %> runs submit - --json',
  ];
  static override flags = {
    set: Flags.string({ description: 'override a key by dotted path before validation (repeatable): env.REGION=us-east-1, steps.build.run="make all"', multiple: true, default: [] }),
    wait: Flags.boolean({ description: 'follow the run until it ends; exit 0 only if it succeeded' }),
  };
  static override summary = 'Submit a run file';

  async run(): Promise<OpsOutput<'runsSubmit'>> {
    const { file } = (await this.parse(RunsSubmit)).args;
    const text = runFileRead(file);
    const ops = await this.ops();
    const submitted = await ops.runsSubmit({ file: text, set: this.flags.set });
    if (!this.jsonEnabled()) this.log(String(submitted.id));
    if (!this.flags.wait) return submitted;
    const seen = new Map<string, StepView>();
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    let view: OpsOutput<'runsShow'>;
    try {
      view = await followRun(ops, submitted.id, {
        signal: stop.signal,
        onView: (v) => {
          if (this.jsonEnabled()) return;
          for (const s of v.steps) {
            const line = stepProgressLine(seen.get(s.name), s);
            if (line) this.logToStderr(line);
            seen.set(s.name, s);
          }
        },
      });
    } finally {
      process.off('SIGINT', onSignal);
    }
    if (!this.jsonEnabled()) {
      const t = table(RUN_TABLE_HEAD);
      t.push(...runTreeRows(view));
      this.logToStderr(t.toString());
      this.logToStderr(runHeadline(view));
    }
    if (view.status !== 'succeeded') {
      if (this.jsonEnabled()) this.logJson(view);
      this.exit(EXIT.failed);
    }
    return view;
  }
}
