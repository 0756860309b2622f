import { readFileSync } from 'node:fs';
import { Args, Flags } from '@oclif/core';
import Table from 'cli-table3';
import { BaseCommand } from '../../src/cli/base.js';
import { UserError } from '../../src/cli/errors.js';
import { cliActor } from '../../src/cli/runs.js';
import { runSnapshot, runWatch } from '../../src/orchestrator/follow.js';
import { RunFileInvalid, runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { RUN_TABLE_HEAD, runHeadline, runTreeRows, runView, stepProgressLine, type RunView, type StepView } from '../../src/views/runs.js';

export default class RunsSubmit extends BaseCommand<typeof RunsSubmit> {
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

  async run(): Promise<RunView | undefined> {
    const { file } = (await this.parse(RunsSubmit)).args;
    let text: string;
    try {
      text = readFileSync(file === '-' ? 0 : file, 'utf8');
    } catch (err) {
      throw new UserError(`cannot read ${file === '-' ? 'stdin' : file}: ${(err as Error).message}`);
    }
    const loaded = runFileLoad(text, this.flags.set);
    const pool = await this.store();
    const { runId } = await runSubmit(pool, loaded, { actor: cliActor(), source: 'cli' });
    if (!this.jsonEnabled()) this.log(String(runId));
    if (!this.flags.wait) {
      const snap = await runSnapshot(pool, runId);
      return runView(snap.run, snap.steps, snap.now);
    }
    const seen = new Map<string, StepView>();
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    let view!: RunView;
    try {
      await runWatch(pool, runId, {
        signal: stop.signal,
        onSnapshot: (snap) => {
          view = runView(snap.run, snap.steps, snap.now);
          if (this.jsonEnabled()) return;
          for (const s of view.steps) {
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
      const table = new Table({ head: RUN_TABLE_HEAD });
      table.push(...runTreeRows(view));
      this.logToStderr(table.toString());
      this.logToStderr(runHeadline(view));
    }
    if (view.status !== 'succeeded') {
      if (this.jsonEnabled()) this.logJson(view);
      this.exit(1);
    }
    return view;
  }

  protected override async catch(err: Error & { oclif?: { exit?: number } }): Promise<unknown> {
    if (err instanceof RunFileInvalid && this.jsonEnabled()) {
      this.logJson({ error: { code: err.code, message: err.message.split('\n')[0].replace(/:$/, ''), problems: err.problems } });
      this.exit(2);
    }
    return super.catch(err);
  }
}
