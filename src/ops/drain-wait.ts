import type { Clock } from '../clock.js';
import { TimedOut } from '../errors.js';
import type { OutstandingLease } from './domain/drain.js';

/** `--wait` ran out of time: the leases still out when it gave up. */
export class DrainWaitTimeout extends TimedOut {
  constructor(readonly waitedMs: number, readonly remaining: OutstandingLease[]) {
    super(`timed out after ${Math.round(waitedMs / 1000)}s: ${remaining.length} lease${remaining.length === 1 ? '' : 's'} still out (${remaining.map(leaseText).join('; ')})`);
    this.name = 'DrainWaitTimeout';
  }
}

export const leaseText = (l: OutstandingLease) => `run ${l.runId}${l.run ? ` (${l.run})` : ''} step ${l.step ?? l.stepId} attempt ${l.attempt} on ${l.runner}`;

export interface DrainWaitResult {
  /** Every lease the wait saw out, in the order first seen. */
  waitedFor: OutstandingLease[];
  waitedMs: number;
}

/**
 * Waits until `read` reports no lease held, polling every `pollMs` on the injected clock, and
 * tells `onChange` what is still out whenever that set changes. Throws DrainWaitTimeout when
 * `timeoutMs` passes first. Transport-agnostic: `read` is a store read or an HTTP call.
 */
export async function drainWait(
  read: () => Promise<OutstandingLease[]>,
  opts: { timeoutMs: number; clock: Clock; pollMs?: number; onChange?: (still: OutstandingLease[], finished: OutstandingLease[]) => void; signal?: AbortSignal },
): Promise<DrainWaitResult> {
  const start = opts.clock.now();
  const seen = new Map<number, OutstandingLease>();
  let last = new Map<number, OutstandingLease>();
  for (;;) {
    const now = await read();
    const current = new Map(now.map((l) => [l.stepId, l]));
    for (const l of now) if (!seen.has(l.stepId)) seen.set(l.stepId, l);
    const changed = current.size !== last.size || [...current.keys()].some((k) => !last.has(k));
    if (changed) opts.onChange?.(now, [...last.values()].filter((l) => !current.has(l.stepId)));
    last = current;
    const waitedMs = opts.clock.now() - start;
    if (now.length === 0) return { waitedFor: [...seen.values()], waitedMs };
    if (waitedMs >= opts.timeoutMs || opts.signal?.aborted) throw new DrainWaitTimeout(waitedMs, now);
    await opts.clock.sleep(Math.min(opts.pollMs ?? 1_000, Math.max(1, opts.timeoutMs - waitedMs)), opts.signal);
  }
}
