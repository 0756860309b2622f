import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

export interface LoggerOptions {
  pretty?: boolean;
  destination?: NodeJS.WritableStream;
  /**
   * Write each line before returning. An asynchronous destination is flushed synchronously at
   * exit, and that flush retries a write to a pipe whose reader has gone (EPIPE) forever: a
   * process that may outlive its reader (`opschain runner | tee log`, then Ctrl-C) must not
   * leave a write in flight at exit.
   */
  sync?: boolean;
  /** The reader of standard output went away (EPIPE): logging stops; the process may want to. */
  onBrokenPipe?: () => void;
}

/** JSON lines for machines; a readable single line per event on a terminal. */
export function createLogger(level: string, opts: LoggerOptions = {}): Logger {
  const usePretty = opts.pretty ?? Boolean(process.stdout.isTTY);
  if (usePretty) {
    return pino({ level }, pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', destination: 1, sync: true }));
  }
  let destination = opts.destination as pino.DestinationStream | undefined;
  if (!destination) {
    const boom = pino.destination({ sync: opts.sync ?? false });
    // pino's own listener turns writes into no-ops on EPIPE; this one only tells the process.
    boom.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') opts.onBrokenPipe?.();
    });
    destination = boom;
  }
  return pino({ level, base: undefined, timestamp: pino.stdTimeFunctions.isoTime }, destination);
}
