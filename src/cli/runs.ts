import { userInfo } from 'node:os';
import { formatDuration } from '../core/duration.js';
import { parseTraceParent } from '../core/trace-ids.js';
import { Invalid, TimedOut } from '../errors.js';
import { followRun } from '../ops/follow.js';
import type { Ops, OpsOutput } from '../ops/index.js';
import { RUN_TABLE_HEAD, runHeadline, runTreeRows, stepProgressLine, type StepView } from '../views/runs.js';
import { table } from './render.js';

/** A run id as typed on the command line. */
export function parseRunId(text: string): number {
  if (!/^\d{1,15}$/.test(text.trim()) || Number(text) < 1) throw new Invalid(`expected a run id (a positive number), got ${JSON.stringify(text)}`);
  return Number(text);
}

/** Who pulled a lever from this shell, for audit rows and causes. */
export function cliActor(): string {
  try {
    return userInfo().username || 'cli';
  } catch {
    return 'cli';
  }
}

/**
 * `--wait` of `runs submit` and `runs retry`: follows the run until it ends, handing each step's
 * progress to `onLine`; Ctrl-C stops following (the run goes on). With `timeoutMs`, a run still
 * running by then is TimedOut (exit 6), naming the run, which goes on.
 */
export async function waitForRun(ops: Ops, id: number, opts: { timeoutMs?: number; /** The --timeout as typed, for the message. */ timeoutText?: string; onLine?: (line: string) => void }): Promise<OpsOutput<'runsShow'>> {
  const seen = new Map<string, StepView>();
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  const deadline = opts.timeoutMs === undefined ? undefined : setTimeout(() => stop.abort(), opts.timeoutMs);
  let view: OpsOutput<'runsShow'>;
  try {
    view = await followRun(ops, id, {
      signal: stop.signal,
      onView: (v) => {
        for (const s of v.steps) {
          const line = stepProgressLine(seen.get(s.name), s);
          if (line) opts.onLine?.(line);
          seen.set(s.name, s);
        }
      },
    });
  } finally {
    clearTimeout(deadline);
    process.off('SIGINT', onSignal);
  }
  if (view.status === 'running' && opts.timeoutMs !== undefined && stop.signal.aborted) {
    throw new TimedOut(`run ${id} still running after ${opts.timeoutText ?? formatDuration(opts.timeoutMs)}; it goes on ('opschain runs cancel ${id}' stops it)`);
  }
  return view;
}

/** The step tree and the headline of a run that ended, as `--wait` prints them on stderr. */
export function runOutcomeLines(view: OpsOutput<'runsShow'>): string[] {
  const t = table(RUN_TABLE_HEAD);
  t.push(...runTreeRows(view));
  return [t.toString(), runHeadline(view)];
}

/**
 * The TRACEPARENT a CI job exported, when it is one: a run submitted from the job joins its trace.
 * A malformed value is not the user's typing (the flag's would be refused): it is set aside with
 * a warning and the run starts a trace of its own.
 */
export function callerTraceParent(value: string | undefined, warn: (message: string) => void): string | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  try {
    parseTraceParent(value);
    return value.trim();
  } catch (err) {
    warn(`TRACEPARENT ignored: ${(err as Error).message}`);
    return undefined;
  }
}
