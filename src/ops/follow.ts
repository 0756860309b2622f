import { systemClock } from '../clock.js';
import type { Ops, OpsOutput } from './index.js';

type RunViewWire = OpsOutput<'runsShow'>;
type LogPage = OpsOutput<'runsLogs'>;

/** How long a follower parks per log read; the server caps it at LOGS_MAX_WAIT_MS. */
export const FOLLOW_WAIT_MS = 20_000;

/**
 * Looks at the run through either transport until it ends (or `signal` aborts), handing each look
 * to `onView`; returns the last look. What `runs submit --wait` follows.
 */
export async function followRun(ops: Ops, id: number, opts: { intervalMs?: number; signal?: AbortSignal; onView: (v: RunViewWire) => void }): Promise<RunViewWire> {
  while (true) {
    const view = await ops.runsShow({ id, verdicts: false });
    opts.onView(view);
    if (view.status !== 'running' || opts.signal?.aborted) return view;
    await systemClock.sleep(opts.intervalMs ?? 500, opts.signal);
  }
}

/**
 * Every log line of the run (or one step) in pages, as they are written when `follow`: each read
 * parks on the server until a line comes or the run ends. Returns the run's status when the last
 * lines were read (still `running` only when not following, or when `signal` aborted).
 */
export async function readRunLogs(
  ops: Ops,
  p: { id: number; step?: string; follow: boolean; signal?: AbortSignal; onLines: (lines: LogPage['lines']) => void },
): Promise<LogPage['status']> {
  let after: string | undefined;
  while (true) {
    const page = await ops.runsLogs({ id: p.id, step: p.step, after, waitMs: p.follow ? FOLLOW_WAIT_MS : 0, limit: 5000 });
    after = page.cursor;
    if (page.lines.length) p.onLines(page.lines);
    if (page.more) continue;
    if (!p.follow || page.status !== 'running' || p.signal?.aborted) return page.status;
  }
}
