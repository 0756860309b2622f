import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { EXIT } from '../../src/cli/errors.js';
import { parseRunId } from '../../src/cli/runs.js';
import { readRunLogs } from '../../src/ops/follow.js';
import { logLineText, stepEndText, type LogLineView } from '../../src/views/runs.js';

export default class RunsLogs extends OpsCommand<typeof RunsLogs> {
  static override args = { id: Args.string({ description: 'run id', required: true }) };
  static override description = `Prints a run's step logs in the order they were written: each line prefixed by its step, "|" for stdout, "!" for stderr, "#" for opschain's own lines; after a step's last line, how its attempt ended (status, exit code, duration).

With --follow, keeps printing new lines until the run ends and then exits as "runs submit --wait" does: 0 if the run succeeded, 1 otherwise. With --json, --follow prints one JSON object per line as it comes (NDJSON).`;
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> runs logs 42', '<%= config.bin %> runs logs 42 --step build --follow'];
  static override flags = {
    follow: Flags.boolean({ char: 'f', description: 'keep printing new lines until the run ends; exit 0 only if it succeeded' }),
    step: Flags.string({ description: 'only this step' }),
  };
  static override summary = "Show a run's logs";

  async run(): Promise<{ lines: LogLineView[] } | undefined> {
    const id = parseRunId((await this.parse(RunsLogs)).args.id);
    const { step, follow } = this.flags;
    const ops = await this.ops();
    const all: LogLineView[] = [];
    // Every step's tag is as wide as the longest step name, so the columns line up as lines come.
    let width = Math.max(0, ...(await ops.runsShow({ id, verdicts: false })).steps.map((s) => s.name.length));
    const terminal = process.stdout.isTTY === true;
    const print = (views: LogLineView[]) => {
      for (const v of views) {
        if (this.jsonEnabled()) process.stdout.write(`${JSON.stringify(v)}\n`);
        else {
          width = Math.max(width, v.step.length);
          // Into a pipe or a file the step's output keeps its bytes; on a terminal it is shown, not obeyed.
          for (const line of logLineText(v, width, { terminal })) {
            if (terminal) this.log(line);
            else this.logVerbatim(line);
          }
        }
      }
    };
    // Human output names each step's end once it has one: after its last line, or (following)
    // after the batch in which it ended. The lines and --json stay as stored.
    const ended = new Set<string>();
    const endLines = async (): Promise<Map<string, LogLineView>> => {
      const out = new Map<string, LogLineView>();
      if (this.jsonEnabled()) return out;
      const view = await ops.runsShow({ id, verdicts: false });
      for (const s of view.steps) {
        const text = step !== undefined && s.name !== step ? null : stepEndText(s);
        if (text === null || ended.has(`${s.name}:${s.attempt}`)) continue;
        ended.add(`${s.name}:${s.attempt}`);
        out.set(s.name, { id: 0, step: s.name, attempt: s.attempt, stream: 'system', text, at: s.finishedAt ?? '' });
      }
      return out;
    };
    /** Each end after its step's last line of the batch; ends of steps without a line in it last. */
    const withEnds = (lines: LogLineView[], ends: Map<string, LogLineView>): LogLineView[] => {
      const last = new Map<string, number>();
      lines.forEach((l, i) => last.set(l.step, i));
      const out: LogLineView[] = [];
      lines.forEach((l, i) => {
        out.push(l);
        const end = ends.get(l.step);
        if (end && last.get(l.step) === i) {
          out.push(end);
          ends.delete(l.step);
        }
      });
      return [...out, ...ends.values()];
    };
    if (!follow) {
      await readRunLogs(ops, { id, step, follow: false, onLines: (lines) => all.push(...lines) });
      if (!this.jsonEnabled()) print(withEnds(all, await endLines()));
      return { lines: all };
    }
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    let status: string;
    try {
      let pending: Promise<void> = Promise.resolve();
      status = await readRunLogs(ops, {
        id,
        step,
        follow: true,
        signal: stop.signal,
        onLines: (lines) => {
          if (this.jsonEnabled()) return print(lines);
          // Printed in order: each batch with the ends it brought, after the batch before it.
          pending = pending.then(async () => print(withEnds(lines, await endLines())));
        },
      });
      await pending;
      if (!this.jsonEnabled()) print([...(await endLines()).values()]);
    } finally {
      process.off('SIGINT', onSignal);
    }
    if (status !== 'succeeded') {
      if (!this.jsonEnabled()) this.logToStderr(`run ${id} ${status}`);
      this.exit(EXIT.failed);
    }
    return undefined;
  }
}
