import { systemClock } from '../clock.js';
import { parseDuration } from '../core/duration.js';
import { drainHeld, drainPreview, drainWait, DrainWaitTimeout, leaseText, type DrainPreview, type DrainTarget, type DrainWaitResult, type HeldLease } from '../dispatch/drain.js';
import { DrainTargetError, fleetDrainSet, type DrainResult } from '../store/fleet.js';
import type { Pool } from '../store/pool.js';
import { NotFoundError, UserError } from './errors.js';
import { cliActor } from './runs.js';

function checkTarget(p: DrainTarget): void {
  if ((p.runner === undefined) === (p.group === undefined)) throw new UserError('name one target: a RUNNER (id or name) or --group G');
  if (p.group !== undefined && !p.group.trim()) throw new UserError('--group: expected a group name');
}

function mapTargetError(err: unknown): never {
  if (err instanceof DrainTargetError) throw err.code === 'not_found' ? new NotFoundError(err.message) : new UserError(err.message, 'ambiguous');
  throw err;
}

/** The one implementation behind `fleet drain` and `fleet undrain`: validates the target, maps store errors. */
export async function drainLever(pool: Pool, p: DrainTarget & { drained: boolean; reason?: string; actor?: string }): Promise<DrainResult> {
  checkTarget(p);
  try {
    return await fleetDrainSet(pool, { runner: p.runner, group: p.group, drained: p.drained, reason: p.reason ?? null, actor: p.actor ?? `cli:${cliActor()}`, source: 'cli' });
  } catch (err) {
    return mapTargetError(err);
  }
}

/** `fleet drain --dry-run`: what would be held; nothing is written. */
export async function drainDryRun(pool: Pool, p: DrainTarget): Promise<DrainPreview> {
  checkTarget(p);
  try {
    return await drainPreview(pool, p);
  } catch (err) {
    return mapTargetError(err);
  }
}

/** `--timeout`: a duration; the default when --wait is given alone. */
export function parseTimeout(text: string | undefined): number {
  if (text === undefined) return 10 * 60_000;
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0) throw new UserError(`--timeout: expected a duration like 30s, 5m or 1h, got ${JSON.stringify(text)}`);
  return ms;
}

/** `fleet drain --wait`: until the target's runners hold no lease; exit 6 (timed_out) when the timeout passes first. */
export async function drainWaitLeases(pool: Pool, p: DrainTarget & { timeoutMs: number; onChange?: (still: HeldLease[], finished: HeldLease[]) => void }): Promise<DrainWaitResult> {
  try {
    return await drainWait(async () => (await drainHeld(pool, p)).leases, { timeoutMs: p.timeoutMs, clock: systemClock, pollMs: 500, onChange: p.onChange });
  } catch (err) {
    if (err instanceof DrainWaitTimeout) throw new UserError(err.message, 'timed_out', 6);
    return mapTargetError(err);
  }
}

export function describeDrain(r: DrainResult): string {
  const what = r.kind === 'group' ? `group ${r.targets[0]}` : `runner ${r.targets[0]}`;
  if (!r.changed) return `${what} already ${r.drained ? 'drained' : 'undrained'}`;
  return r.drained ? `${what} drained: its polls are answered empty, its running work continues` : `${what} undrained`;
}

/** The dry run for people: each list with its count, or "none". */
export function describePreview(p: DrainPreview): string[] {
  const who = p.target.kind === 'group' ? `group ${p.target.name} (${p.target.runners.length} runner${p.target.runners.length === 1 ? '' : 's'})` : `runner ${p.target.name}`;
  const lines = [`dry run, nothing changed: ${who}${p.target.drained ? ' is already drained' : ''}`];
  const section = <T>(title: string, items: T[], text: (x: T) => string) => {
    lines.push(`${title}: ${items.length === 0 ? 'none' : items.length}`);
    for (const x of items) lines.push(`  ${text(x)}`);
  };
  section('leases still out (--wait waits for these)', p.leases, leaseText);
  section('pinned runs that will wait', p.pinnedRuns, (r) => `run ${r.runId}${r.run ? ` (${r.run})` : ''} pinned to ${r.runner}, ${r.queued} step${r.queued === 1 ? '' : 's'} queued`);
  section('queued entries left with no eligible runner', p.stranded, (e) => `step ${e.stepId} of run ${e.runId} [${e.lane}]: ${e.reason}`);
  if (p.examined < p.readyTotal) lines.push(`(the first ${p.examined} of ${p.readyTotal} ready entries examined)`);
  return lines;
}
