import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/** JSON lines for machines; a readable single line per event on a terminal. */
export function createLogger(level: string, opts: { pretty?: boolean; destination?: NodeJS.WritableStream } = {}): Logger {
  const usePretty = opts.pretty ?? Boolean(process.stdout.isTTY);
  if (usePretty) {
    return pino({ level }, pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', destination: 1, sync: true }));
  }
  return pino({ level, base: undefined, timestamp: pino.stdTimeFunctions.isoTime }, (opts.destination as pino.DestinationStream | undefined) ?? pino.destination({ sync: false }));
}
