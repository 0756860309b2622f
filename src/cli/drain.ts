import { systemClock } from '../clock.js';
import { parseDuration } from '../core/duration.js';
import type { DrainPreview, DrainTarget, OutstandingLease } from '../ops/domain/drain.js';
import { drainWait, leaseText, type DrainWaitResult } from '../ops/drain-wait.js';
import { Invalid } from '../errors.js';
import type { Ops, Wire } from '../ops/index.js';
import type { DrainResult } from '../store/fleet.js';

/** `--timeout`: a duration; the default when --wait is given alone. */
export function parseTimeout(text: string | undefined): number {
  if (text === undefined) return 10 * 60_000;
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0) throw new Invalid(`--timeout: expected a duration like 30s, 5m or 1h, got ${JSON.stringify(text)}`);
  return ms;
}

/**
 * `fleet drain --wait`: until the target's runners hold no lease, through either transport; exit 6
 * (TimedOut) when the timeout passes first.
 */
export async function drainWaitLeases(ops: Ops, p: DrainTarget & { timeoutMs: number; onChange?: (still: OutstandingLease[], finished: OutstandingLease[]) => void }): Promise<DrainWaitResult> {
  return drainWait(async () => (await ops.fleetDrainOutstanding({ runner: p.runner, group: p.group })).leases as OutstandingLease[], { timeoutMs: p.timeoutMs, clock: systemClock, pollMs: 500, onChange: p.onChange });
}

export function describeDrain(r: DrainResult): string {
  // The runner by the name the operator reads in `fleet runners` (its id when it has none).
  const what = r.kind === 'group' ? `group ${r.targets[0]}` : `runner ${r.names?.[0] ?? r.targets[0]}`;
  if (!r.changed) return `${what} already ${r.drained ? 'drained' : 'undrained'}`;
  return r.drained ? `${what} drained: its polls are answered empty, its running work continues` : `${what} undrained`;
}

/** The dry run for people: each list with its count, or "none". */
export function describePreview(p: Wire<DrainPreview>): string[] {
  const who = p.target.kind === 'group' ? `group ${p.target.name} (${p.target.runners.length} runner${p.target.runners.length === 1 ? '' : 's'})` : `runner ${p.target.runners[0]?.name ?? p.target.name}`;
  const lines = [`dry run, nothing changed: ${who}${p.target.drained ? ' is already drained' : ''}`];
  const section = <T>(title: string, items: T[], text: (x: T) => string) => {
    lines.push(`${title}: ${items.length === 0 ? 'none' : items.length}`);
    for (const x of items) lines.push(`  ${text(x)}`);
  };
  section('leases still out (--wait waits for these)', p.leases as OutstandingLease[], leaseText);
  section('pinned runs that will wait', p.pinnedRuns, (r) => `run ${r.runId}${r.run ? ` (${r.run})` : ''} pinned to ${r.runner}, ${r.queued} step${r.queued === 1 ? '' : 's'} queued`);
  section('queued entries left with no eligible runner', p.stranded, (e) => `step ${e.stepId} of run ${e.runId} [${e.lane}]: ${e.reason}`);
  if (p.examined < p.readyTotal) lines.push(`(the first ${p.examined} of ${p.readyTotal} ready entries examined)`);
  return lines;
}
