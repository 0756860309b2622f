/**
 * A drain's shapes and its wait, apart from the store reads (src/dispatch/drain.ts): the wait runs
 * over either transport, so a verb that drains through a server loads no store code.
 */
import type { Clock } from '../clock.js';
import type { LaneName } from '../core/entry.js';
import { TimedOut } from '../errors.js';

/** A drain names one runner (id or unique name) or a group. */
export interface DrainTarget { runner?: string; group?: string }

export interface HeldLease {
  stepId: number;
  runId: number;
  step: string | null;
  run: string | null;
  attempt: number;
  runner: string;
  executing: boolean;
  deliveredAt: string | null;
}

export interface DrainTargetJson { kind: 'runner' | 'group'; name: string; runners: Array<{ id: string; name: string }>; drained: boolean }

/** What a drain would hold, read without changing anything (`fleet drain --dry-run`). */
export interface DrainPreview {
  dryRun: true;
  target: DrainTargetJson;
  /** Leases still out on the target's runners: a `--wait` waits for these. */
  leases: HeldLease[];
  /** Run-scoped runs pinned to the target's runners: their remaining steps wait for the drain to be lifted. */
  pinnedRuns: Array<{ runId: number; run: string | null; runner: string; queued: number }>;
  /** Ready entries that no undrained runner could take once the target is drained. */
  stranded: Array<{ stepId: number; runId: number; lane: LaneName; reason: string }>;
  /** How many ready entries were examined (the head of the queue), of how many. */
  examined: number;
  readyTotal: number;
}

export class DrainWaitTimeout extends TimedOut {
  constructor(readonly waitedMs: number, readonly remaining: HeldLease[]) {
    super(`timed out after ${Math.round(waitedMs / 1000)}s: ${remaining.length} lease${remaining.length === 1 ? '' : 's'} still out (${remaining.map(leaseText).join('; ')})`);
    this.name = 'DrainWaitTimeout';
  }
}

export const leaseText = (l: HeldLease) => `run ${l.runId}${l.run ? ` (${l.run})` : ''} step ${l.step ?? l.stepId} attempt ${l.attempt} on ${l.runner}`;

export interface DrainWaitResult {
  /** Every lease the wait saw out, in the order first seen. */
  waitedFor: HeldLease[];
  waitedMs: number;
}

/**
 * Waits until `read` reports no lease held, polling every `pollMs` on the injected clock, and
 * tells `onChange` what is still out whenever that set changes. Throws DrainWaitTimeout when
 * `timeoutMs` passes first. Transport-agnostic: `read` is a store read or an HTTP call.
 */
export async function drainWait(
  read: () => Promise<HeldLease[]>,
  opts: { timeoutMs: number; clock: Clock; pollMs?: number; onChange?: (still: HeldLease[], finished: HeldLease[]) => void; signal?: AbortSignal },
): Promise<DrainWaitResult> {
  const start = opts.clock.now();
  const seen = new Map<number, HeldLease>();
  let last = new Map<number, HeldLease>();
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
