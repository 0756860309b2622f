import { watchPipeReader } from '../pipe-reader.js';
import { ConsoleFeed } from './feed.js';
import type { ConsoleSource } from './source.js';

export type { ConsoleSource } from './source.js';

export interface ConsoleOptions {
  source: ConsoleSource;
  intervalMs: number;
  limit: number;
  /** auto: the dashboard on a terminal, NDJSON otherwise; ndjson: always NDJSON. */
  mode: 'auto' | 'ndjson';
  stdout?: NodeJS.WriteStream;
  stdin?: NodeJS.ReadStream;
  stderr?: NodeJS.WriteStream;
}

/**
 * The one facade the command calls. On a terminal (stdin and stdout both TTYs) it runs the Ink
 * dashboard until the operator quits; otherwise it prints one NDJSON snapshot per interval (the
 * fields of `admin queue --json`) until SIGTERM or SIGINT, then returns so the process exits 0.
 */
export async function runConsole(opts: ConsoleOptions): Promise<void> {
  const stdout = opts.stdout ?? process.stdout;
  const stdin = opts.stdin ?? process.stdin;
  try {
    if (opts.mode === 'auto' && stdout.isTTY && stdin.isTTY) {
      // Ink draws only the final frame when CI or CONTINUOUS_INTEGRATION is set (read once, when
      // it is first imported); both ends are terminals a person is watching, so draw live.
      for (const key of ['CI', 'CONTINUOUS_INTEGRATION']) if (key in process.env) process.env[key] = 'false';
      const { runDashboard } = await import('./dashboard.js');
      await runDashboard({ source: opts.source, intervalMs: opts.intervalMs, limit: opts.limit, stdout, stdin });
    } else {
      await runPipe({ ...opts, stdout, stderr: opts.stderr ?? process.stderr });
    }
  } finally {
    await opts.source.close();
  }
}

async function runPipe(opts: ConsoleOptions & { stdout: NodeJS.WriteStream; stderr: NodeJS.WriteStream }): Promise<void> {
  // One line per interval, exactly: the store's notifications do not wake the pipe.
  const feed = new ConsoleFeed({ source: { ...opts.source, subscribe: undefined }, intervalMs: opts.intervalMs, limit: opts.limit });
  let lastError: string | null = null;
  feed.onChange((s) => {
    if (s.stale) {
      if (s.stale.cause !== lastError) opts.stderr.write(`store unavailable: ${s.stale.cause} (retrying every ${opts.intervalMs / 1000}s)\n`);
      lastError = s.stale.cause;
      return;
    }
    lastError = null;
    if (s.view) opts.stdout.write(`${JSON.stringify(s.view)}\n`);
  });
  await new Promise<void>((resolve) => {
    let unwatch = () => {};
    const done = () => {
      unwatch();
      process.off('SIGTERM', done);
      process.off('SIGINT', done);
      opts.stdout.off('error', done);
      resolve();
    };
    process.on('SIGTERM', done);
    process.on('SIGINT', done);
    // A closed pipe (`| head -1`) ends the stream quietly.
    opts.stdout.on('error', done);
    // …and at once, not a refresh later, when stdout is a pipe whose reader has gone.
    if (opts.stdout === process.stdout) unwatch = watchPipeReader(done);
    feed.start();
  });
  await feed.stop();
}
