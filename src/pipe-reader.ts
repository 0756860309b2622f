import { spawn } from 'node:child_process';
import { fstatSync } from 'node:fs';

/**
 * Calls `onGone` as soon as the reader of standard output (a pipe: `| head -3`) has gone, not at
 * the next write. Node cannot poll a pipe's write end for the error the kernel raises when its
 * reader closes; GNU tail can, and `tail -f` dies of SIGPIPE the moment it sees it (coreutils
 * ≥ 8.28). So a `tail -f /dev/null` sharing our stdout is the watchdog: it writes nothing, and
 * `--pid` ends it with us even if we are killed, so it never holds the pipe open after us.
 * Elsewhere (a file, a terminal, no GNU tail) it does nothing and the next write's EPIPE remains
 * the signal. Returns the function that stops watching.
 */
export function watchPipeReader(onGone: () => void, fd = 1): () => void {
  if (process.platform !== 'linux') return () => {};
  try {
    if (!fstatSync(fd).isFIFO()) return () => {};
  } catch {
    return () => {};
  }
  const stdio: ('ignore' | number)[] = ['ignore', 'ignore', 'ignore'];
  stdio[1] = fd;
  const watchdog = spawn('tail', ['-f', '-s', '0.2', '/dev/null', `--pid=${process.pid}`], { stdio });
  let stopped = false;
  watchdog.on('error', () => {});
  watchdog.on('exit', (_code, signal) => {
    if (!stopped && signal === 'SIGPIPE') onGone();
  });
  watchdog.unref();
  const stop = () => {
    stopped = true;
    process.off('exit', stop);
    watchdog.kill();
  };
  process.on('exit', stop);
  return stop;
}
