import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { UserError } from '../../src/cli/errors.js';
import { parseRunId } from '../../src/cli/runs.js';
import { runLogsFollow, runSnapshot } from '../../src/orchestrator/follow.js';
import { stepLogRead } from '../../src/store/logs.js';
import { logLineText, logLineView, type LogLineView } from '../../src/views/runs.js';

export default class RunsLogs extends BaseCommand<typeof RunsLogs> {
  static override args = { id: Args.string({ description: 'run id', required: true }) };
  static override description = `Prints a run's step logs in the order they were written: each line prefixed by its step, "|" for stdout, "!" for stderr, "#" for opschain's own lines.

With --follow, keeps printing new lines until the run ends; with --json, --follow prints one JSON object per line as it comes (NDJSON).`;
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> runs logs 42', '<%= config.bin %> runs logs 42 --step build --follow'];
  static override flags = {
    follow: Flags.boolean({ char: 'f', description: 'keep printing new lines until the run ends' }),
    step: Flags.string({ description: 'only this step' }),
  };
  static override summary = "Show a run's logs";

  async run(): Promise<{ lines: LogLineView[] } | undefined> {
    const id = parseRunId((await this.parse(RunsLogs)).args.id);
    const pool = await this.store();
    const snap = await runSnapshot(pool, id);
    const { step, follow } = this.flags;
    if (step !== undefined && !snap.steps.some((s) => s.name === step)) throw new UserError(`run ${id} has no step named ${JSON.stringify(step)}`);
    const width = Math.max(...snap.steps.map((s) => s.name.length));
    const terminal = process.stdout.isTTY === true;
    const print = (views: LogLineView[]) => {
      for (const v of views) {
        if (this.jsonEnabled()) process.stdout.write(`${JSON.stringify(v)}\n`);
        else for (const line of logLineText(v, width, { terminal })) this.log(line);
      }
    };
    if (!follow) {
      const lines = (await stepLogRead(pool, { runId: id, step, limit: 1_000_000 })).map(logLineView);
      if (!this.jsonEnabled()) print(lines);
      return { lines };
    }
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    try {
      await runLogsFollow(pool, { runId: id, step, signal: stop.signal, onLines: (lines) => print(lines.map(logLineView)) });
    } finally {
      process.off('SIGINT', onSignal);
    }
    return undefined;
  }
}
