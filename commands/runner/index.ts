import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { Invalid } from '../../src/errors.js';
import { parseDuration } from '../../src/core/duration.js';
import { createLogger } from '../../src/logger.js';
import { RunnerConfigError, runRunner } from '../../src/runner/main.js';

export default class Runner extends BaseCommand<typeof Runner> {
  // The runner speaks only HTTP to its servers: no store flag.
  static override baseFlags = { ...BaseCommand.baseFlags, 'database-url': { ...BaseCommand.baseFlags['database-url'], hidden: true } };
  static override description =
    'Run the runner agent: register once (the identity is kept under $OPSCHAIN_HOME/runner), long-poll for steps, run each with /bin/sh -c in its own process group, stream its output, renew its lease and report its exit code. With no flags on the server\'s machine it finds the local server and registration token. SIGTERM or Ctrl-C: stop polling, let running steps finish within --grace, release the rest.';
  static override examples = [
    '<%= config.bin %> runner',
    '<%= config.bin %> runner --server http://ops-a:7420,http://ops-b:7420 --registration-token ocreg_… --group build --label linux',
    '<%= config.bin %> runner --max-parallel-steps 4 --work-dir /var/lib/opschain/work --grace 2m',
  ];
  static override flags = {
    executor: Flags.string({ description: 'an executor this runner offers (repeatable) [default: shell]', multiple: true }),
    grace: Flags.string({ description: 'on SIGTERM, how long running steps may take before they are stopped and released', default: '30s' }),
    group: Flags.string({ description: 'the runner group it joins' }),
    history: Flags.string({ description: 'append each step\'s start and finish (step, attempt, token, times, outcome) to this file as JSON lines', env: 'OPSCHAIN_RUNNER_HISTORY' }),
    label: Flags.string({ description: 'a label for placement (repeatable)', multiple: true }),
    'log-level': Flags.string({ description: 'how much the runner logs', default: 'info', options: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] }),
    'max-load': Flags.integer({ description: 'capacity in step load units [default: CPU threads]', min: 1, max: 100_000 }),
    'max-parallel-steps': Flags.integer({ description: 'how many steps it runs at once', default: 1, min: 1, max: 64 }),
    name: Flags.string({ description: 'runner name; also names its identity file [default: hostname]' }),
    once: Flags.boolean({ description: 'take one batch of work, run it, exit' }),
    'pass-env': Flags.string({ description: 'a variable of the runner\'s environment steps may see, or PREFIX_* (repeatable); steps otherwise see only PATH, locale, TZ, TMPDIR, HOME, USER', multiple: true }),
    'registration-token': Flags.string({ description: 'registration token (ocreg_…), needed only for the first start [default: the local server\'s]', env: 'OPSCHAIN_REGISTRATION_TOKEN' }),
    server: Flags.string({ description: 'server URL; repeat or comma-separate for an ordered failover list [default: OPSCHAIN_SERVER, then the local server]', multiple: true }),
    site: Flags.string({ description: 'the site this runner is in, e.g. dc1' }),
    'step-user': Flags.string({ description: 'run steps as this unprivileged user, who cannot read the runner\'s secrets (the runner must run as root)' }),
    'work-dir': Flags.string({ description: 'where steps run, one directory each; never inside the home [default: $TMPDIR/opschain-work-UID/NAME]' }),
  };
  static override summary = 'Run the runner agent';

  async run(): Promise<void> {
    const f = this.flags;
    const graceMs = parseDuration(f.grace);
    if (graceMs === undefined) throw new Invalid(`--grace ${f.grace}: expected a duration like 30s or 2m`);
    // The reader of our output may go first (`opschain runner | tee log`, then Ctrl-C stops both):
    // a broken pipe is a stop request, like the signal that usually comes with it, never a wedge.
    const brokenPipe = new AbortController();
    const onOutputError = (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') brokenPipe.abort();
    };
    process.stdout.on('error', onOutputError);
    process.stderr.on('error', onOutputError);
    const log = createLogger(f['log-level'], { sync: true, onBrokenPipe: () => brokenPipe.abort() });
    const code = await runRunner(
      {
        home: this.home,
        servers: f.server ?? [],
        registrationToken: f['registration-token'],
        name: f.name,
        group: f.group,
        labels: f.label ?? [],
        executors: f.executor ?? [],
        site: f.site,
        maxLoad: f['max-load'],
        maxParallelSteps: f['max-parallel-steps'],
        workDir: f['work-dir'],
        passEnv: f['pass-env'] ?? [],
        stepUser: f['step-user'],
        graceMs,
        once: f.once,
        history: f.history,
      },
      log,
      brokenPipe.signal,
    ).catch((err) => {
      throw err instanceof RunnerConfigError ? new Invalid(err.message, 'invalid_runner_setup') : err;
    });
    try {
      log.flush?.();
    } catch {
      // Nothing left to write to.
    }
    // Keep-alive sockets to the servers must not hold the process open.
    process.exit(code);
  }
}
