import { NotFound } from '../errors.js';
import { stepLogRead, type LogLine } from '../store/logs.js';
import type { Pool } from '../store/pool.js';
import { runGet, runRead, type RunRow, type StepRow } from '../store/runs.js';

export interface RunSnapshot { run: RunRow; steps: StepRow[]; now: Date }

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/** The run as it stands; NotFoundError when there is no such run. */
export async function runSnapshot(pool: Pool, runId: number): Promise<RunSnapshot> {
  const snap = await runRead(pool, runId);
  if (!snap) throw new NotFound(`no run with id ${runId}`);
  return snap;
}

/**
 * Looks at the run every `intervalMs` until it finishes (or `signal` aborts), handing each look to
 * `onSnapshot`. Returns the last look.
 */
export async function runWatch(pool: Pool, runId: number, opts: { intervalMs?: number; signal?: AbortSignal; onSnapshot: (s: RunSnapshot) => void }): Promise<RunSnapshot> {
  while (true) {
    const snap = await runSnapshot(pool, runId);
    opts.onSnapshot(snap);
    if (snap.run.status !== 'running' || opts.signal?.aborted) return snap;
    await sleep(opts.intervalMs ?? 500, opts.signal);
  }
}

/**
 * Hands every log line of the run (or one step) to `onLines` as it is written, until the run has
 * finished and its last lines are out (or `signal` aborts). Returns the run as it ended.
 */
export async function runLogsFollow(
  pool: Pool,
  p: { runId: number; step?: string; intervalMs?: number; signal?: AbortSignal; onLines: (lines: LogLine[]) => void },
): Promise<RunRow> {
  const batch = 1000;
  const after = new Map<number, number>();
  while (true) {
    // The status is read before the lines, so the lines written before it finished are all seen.
    const run = await runGet(pool, p.runId);
    if (!run) throw new NotFound(`no run with id ${p.runId}`);
    let lines: LogLine[];
    do {
      lines = await stepLogRead(pool, { runId: p.runId, step: p.step, after, limit: batch });
      for (const l of lines) after.set(l.stepId, Math.max(after.get(l.stepId) ?? 0, l.id));
      if (lines.length) p.onLines(lines);
    } while (lines.length === batch);
    if (run.status !== 'running' || p.signal?.aborted) return run;
    await sleep(p.intervalMs ?? 500, p.signal);
  }
}
