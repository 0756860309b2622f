import { LANE_NAMES, type LaneName } from '../../core/entry.js';
import type { Wire } from '../../core/wire.js';
import { verdict } from '../../core/verdict.js';
import { drainTargetRead, fleetQueueRead, runnerLeasesRead, runnerPinsRead, type DrainTargetRow, type RunnerLeaseRow } from '../../store/fleet.js';
import type { Pool } from '../../store/pool.js';

/** A drain names one runner (id or unique name) or a group. */
export interface DrainTarget { runner?: string; group?: string }

/** A lease still out on a drain target's runner, named by the runner's name. */
export type OutstandingLease = Wire<Omit<RunnerLeaseRow, 'runnerId'>> & { runner: string };

export interface DrainTargetJson { kind: 'runner' | 'group'; name: string; runners: Array<{ id: string; name: string }>; drained: boolean }

/** What a drain would hold, read without changing anything (`fleet drain --dry-run`). */
export interface DrainPreview {
  dryRun: true;
  target: DrainTargetJson;
  /** Leases still out on the target's runners: a `--wait` waits for these. */
  leases: OutstandingLease[];
  /** Run-scoped runs pinned to the target's runners: their remaining steps wait for the drain to be lifted. */
  pinnedRuns: Array<{ runId: number; run: string | null; runner: string; queued: number }>;
  /** Ready entries that no undrained runner could take once the target is drained. */
  stranded: Array<{ stepId: number; runId: number; lane: LaneName; reason: string }>;
  /** How many ready entries were examined (the head of the queue), of how many. */
  examined: number;
  readyTotal: number;
}

const held = (runners: DrainTargetRow['runners'], l: RunnerLeaseRow): OutstandingLease => ({
  stepId: l.stepId,
  runId: l.runId,
  step: l.step,
  run: l.run,
  attempt: l.attempt,
  runner: runners.find((r) => r.id === l.runnerId)?.name ?? l.runnerId,
  executing: l.executing,
  deliveredAt: l.deliveredAt?.toISOString() ?? null,
});

/** The leases still out on a drain target's runners (an unknown target throws NotFound). */
export async function drainOutstanding(pool: Pool, target: DrainTarget): Promise<{ target: DrainTargetJson; leases: OutstandingLease[] }> {
  const t = await drainTargetRead(pool, target);
  const leases = await runnerLeasesRead(pool, t.runners.map((r) => r.id));
  return { target: t, leases: leases.map((l) => held(t.runners, l)) };
}

/** How many ready entries a dry run examines, from the head of the queue. */
const PREVIEW_LIMIT = 5_000;

/**
 * `fleet drain --dry-run`: the leases still out on the target's runners, the pinned runs that
 * will wait for them, and the queued entries that would be left with no eligible runner (their
 * verdict, computed by the dispatcher's own ladder with the target drained, becomes "every
 * matching runner drained" or "pinned runner busy: drained"). Reads only.
 */
export async function drainPreview(pool: Pool, target: DrainTarget): Promise<DrainPreview> {
  const t = await drainTargetRead(pool, target);
  const ids = t.runners.map((r) => r.id);
  const [leases, pins, snap] = await Promise.all([runnerLeasesRead(pool, ids), runnerPinsRead(pool, ids), fleetQueueRead(pool, { limit: PREVIEW_LIMIT })]);
  const targets = new Set(ids);
  const fleetNow = { runners: snap.runners, outstandingByRun: snap.outstandingByRun, runnerRuns: snap.runnerRuns };
  const fleetDrained = { ...fleetNow, runners: snap.runners.map((r) => (targets.has(r.runnerId) ? { ...r, drained: true } : r)) };
  // Postures aside: the question is what the drain itself strands.
  const open = { halted: false, fleetQuiesced: false, acceptExceeding: true };
  const stranded: DrainPreview['stranded'] = [];
  for (const e of snap.ready) {
    const after = verdict(e, fleetDrained, open, snap.pools, snap.pins);
    if (after.code !== 'all_matches_drained' && !(after.code === 'pinned_runner_busy' && targets.has(snap.pins.get(e.runId) ?? ''))) continue;
    const before = verdict(e, fleetNow, open, snap.pools, snap.pins);
    if (before.code === after.code && before.reason === after.reason) continue;
    stranded.push({ stepId: e.stepId, runId: e.runId, lane: LANE_NAMES[e.lane], reason: after.reason });
  }
  return {
    dryRun: true,
    target: t,
    leases: leases.map((l) => held(t.runners, l)),
    pinnedRuns: pins.map((p) => ({ runId: p.runId, run: p.run, runner: t.runners.find((r) => r.id === p.runnerId)?.name ?? p.runnerId, queued: p.queued })),
    stranded,
    examined: snap.ready.length,
    readyTotal: snap.readyTotal,
  };
}
