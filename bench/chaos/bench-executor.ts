/**
 * The chaos run's step executor: a workload step (its side effect, then perhaps `sleep N`) runs
 * inside the runner process instead of forking /bin/sh, so at thousands of steps the rate
 * measured is the dispatch plane's, not the machine's fork rate. The side effect is the same
 * line the shell would append (the pid is the runner's), once per execution, so the checker's
 * double-execution count means what it means for shell steps. Any other command runs in the
 * shell as usual. A kill (fenced lease, shutdown) or a timeout ends the step at once.
 */
import { appendFileSync } from 'node:fs';
import { formatDuration } from '../../src/core/duration.js';
import { execute, type ExecRequest, type ExecResult, type Execution } from '../../src/runner/executor.js';
import { SIDE_EFFECT } from './schedule.js';

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const WORKLOAD_STEP = new RegExp(`^${escape(SIDE_EFFECT)}(?:; sleep (\\d+(?:\\.\\d+)?))?$`);

export function benchExecute(req: ExecRequest): Execution {
  const m = WORKLOAD_STEP.exec(req.command.trim());
  const side = req.env.CHAOS_SIDE;
  if (!m || !side) return execute(req);
  let resolve!: (r: ExecResult) => void;
  const done = new Promise<ExecResult>((r) => (resolve = r));
  const timers: NodeJS.Timeout[] = [];
  const end = (r: ExecResult) => {
    for (const t of timers) clearTimeout(t);
    resolve(r);
  };
  try {
    appendFileSync(side, `${req.env.OPSCHAIN_RUN_ID} ${req.env.OPSCHAIN_STEP} ${req.env.OPSCHAIN_ATTEMPT} ${process.pid}\n`);
  } catch (err) {
    req.onOutput('stderr', `${(err as Error).message}\n`);
    end({ exitCode: 1, signal: null, timedOut: false, cause: null });
    return { pid: undefined, done, kill: () => {} };
  }
  timers.push(setTimeout(() => end({ exitCode: 0, signal: null, timedOut: false, cause: null }), m[1] ? Number(m[1]) * 1000 : 0));
  if (req.timeoutMs && req.timeoutMs > 0) {
    timers.push(setTimeout(() => end({ exitCode: null, signal: null, timedOut: true, cause: `timed out after ${formatDuration(req.timeoutMs!)}` }), req.timeoutMs));
  }
  return { pid: undefined, done, kill: (cause) => end({ exitCode: null, signal: 'SIGTERM', timedOut: false, cause }) };
}
