import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { parseTimeout } from '../../src/cli/drain.js';
import { EXIT } from '../../src/cli/errors.js';
import { callerTraceParent, runOutcomeLines, waitForRun } from '../../src/cli/runs.js';
import { runFileRead } from '../../src/orchestrator/runfile.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class RunsSubmit extends OpsCommand<typeof RunsSubmit> {
  static override args = {
    file: Args.string({ description: 'the run file (YAML or JSON); - reads it from stdin', required: true }),
  };
  static override description = `Validates a run file and starts the run; prints its id. A bad file is refused whole, every problem listed with its path (exit 2), and nothing is written.

With --traceparent (or the TRACEPARENT variable CI systems set) the run joins the caller's OpenTelemetry trace (docs/tracing.md).

With --wait, follows the run until it ends, printing each step's progress on stderr, and exits 0 only if it succeeded (1 otherwise); with --timeout it gives up after that long (exit 6) and the run goes on.`;
  static override enableJsonFlag = true;
  static override examples = [
    '<%= config.bin %> runs submit examples/hello.yaml',
    '<%= config.bin %> runs submit deploy.yaml --set env.REGION=us-east-1 --set priority=60 --wait',
    '<%= config.bin %> runs submit deploy.yaml --wait --timeout 30m',
    'cat run.json | <%= config.bin %> runs submit - --json',
    '<%= config.bin %> runs submit deploy.yaml --traceparent 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  ];
  static override flags = {
    set: Flags.string({ description: 'override a key by dotted path before validation (repeatable): env.REGION=us-east-1, steps.build.run="make all"', multiple: true, default: [] }),
    traceparent: Flags.string({ description: 'a W3C traceparent: the run joins that trace [default: $TRACEPARENT when it is one]' }),
    timeout: Flags.string({ description: 'with --wait: give up (exit 6) after this long; the run goes on [default: no limit]', dependsOn: ['wait'] }),
    wait: Flags.boolean({ description: 'follow the run until it ends; exit 0 only if it succeeded' }),
  };
  static override summary = 'Submit a run file';

  async run(): Promise<OpsOutput<'runsSubmit'>> {
    const { file } = (await this.parse(RunsSubmit)).args;
    const text = runFileRead(file);
    // A bad --timeout is refused before anything is submitted.
    const timeoutMs = this.flags.timeout === undefined ? undefined : parseTimeout(this.flags.timeout);
    // Said on stderr even with --json (which keeps logToStderr quiet): stdout stays the JSON.
    const traceparent = this.flags.traceparent ?? callerTraceParent(process.env.TRACEPARENT, (m) => process.stderr.write(`Warning: ${m}\n`));
    const ops = await this.ops();
    const submitted = await ops.runsSubmit({ file: text, set: this.flags.set, ...(traceparent ? { traceparent } : {}) });
    if (!this.jsonEnabled()) this.log(String(submitted.id));
    if (!this.flags.wait) return submitted;
    const view = await waitForRun(ops, submitted.id, { timeoutMs, timeoutText: this.flags.timeout, onLine: this.jsonEnabled() ? undefined : (line) => this.logToStderr(line) });
    if (!this.jsonEnabled()) for (const line of runOutcomeLines(view)) this.logToStderr(line);
    if (view.status !== 'succeeded') {
      if (this.jsonEnabled()) this.logJson(view);
      this.exit(EXIT.failed);
    }
    return view;
  }
}
