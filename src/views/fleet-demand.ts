import type { PlacementRequirement } from '../core/entry.js';
import { DEMAND_REASONS, type CapacityLease, type CapacityState, type Demand, type DemandReason, type GroupDemand, type WhatIf } from '../core/capacity.js';
import type { VerdictCode } from '../core/verdict.js';

/** How many distinct placement shapes of capacity-bound work demand lists (the largest first). */
export const DEMAND_SHAPES_SHOWN = 20;

export interface DemandShape {
  requirement: PlacementRequirement | null;
  groups: string[];
  capacity: number;
  oldestCapacityWaitSeconds: number;
}

export interface FleetDemandView {
  at: string;
  /** `quiesced`: the fleet quiesce's first field name, deprecated, still sent beside `fleetQuiesced` (docs/levers.md). */
  posture: { halted: boolean; fleetQuiesced: boolean; quiesced: boolean; systemQuiesced: boolean; reason: string | null };
  /** Every reason a group row counts, in this order. */
  reasons: readonly DemandReason[];
  groups: GroupDemand[];
  /** Every entry once (an entry attributed to two groups counts in each row but once here). */
  total: GroupDemand;
  /** Capacity-bound entries by placement shape, the largest first; `shapesOmitted` more beyond. */
  shapes: DemandShape[];
  shapesOmitted: number;
  /** Entries beyond the read's bound (20,000 in claim order), judged by shape: counted above, never as starting. */
  judgedByShape: number;
}

/** The demand read model: per group rows (or the named ones), the total, and the shapes of capacity-bound work. */
export function buildFleetDemand(s: CapacityState, d: Demand, opts: { groups?: string[] } = {}): FleetDemandView {
  const byShape = new Map<PlacementRequirement | null, DemandShape>();
  const nowMs = s.now.getTime();
  for (const j of d.entries) {
    if (j.reason !== 'capacity') continue;
    // By object first (the capacity read parses each shape once), cheap for a deep queue.
    const key = j.entry.requirement;
    let shape = byShape.get(key);
    if (!shape) byShape.set(key, (shape = { requirement: j.entry.requirement, groups: j.groups, capacity: 0, oldestCapacityWaitSeconds: 0 }));
    shape.capacity += 1;
    shape.oldestCapacityWaitSeconds = Math.max(shape.oldestCapacityWaitSeconds, Math.max(0, (nowMs - j.entry.readyAt.getTime()) / 1000));
  }
  // Equal requirements parsed apart (another source than the capacity read) still merge here.
  const merged = new Map<string, DemandShape>();
  for (const sh of byShape.values()) {
    const k = JSON.stringify(sh.requirement);
    const m = merged.get(k);
    if (!m) merged.set(k, sh);
    else {
      m.capacity += sh.capacity;
      m.oldestCapacityWaitSeconds = Math.max(m.oldestCapacityWaitSeconds, sh.oldestCapacityWaitSeconds);
    }
  }
  const shapes = [...merged.values()].sort((a, b) => b.capacity - a.capacity || b.oldestCapacityWaitSeconds - a.oldestCapacityWaitSeconds);
  const wanted = opts.groups ? new Set(opts.groups) : null;
  return {
    at: s.now.toISOString(),
    posture: { halted: s.postures.halted, fleetQuiesced: s.postures.fleetQuiesced, quiesced: s.postures.fleetQuiesced, systemQuiesced: s.postures.systemQuiesced ?? false, reason: s.postures.reason ?? null },
    reasons: DEMAND_REASONS,
    groups: wanted ? d.groups.filter((g) => wanted.has(g.group)) : d.groups,
    total: d.total,
    shapes: shapes.slice(0, DEMAND_SHAPES_SHOWN),
    shapesOmitted: Math.max(0, shapes.length - DEMAND_SHAPES_SHOWN),
    judgedByShape: s.tail.reduce((n, t) => n + t.count, 0),
  };
}

export const FLEET_DEMAND_HEAD = ['group', 'capacity', 'oldest', 'starting', 'blocked', 'leased', 'running', 'idle', 'busy', 'drained', 'offline'];

const secs = (s: number) => (s === 0 ? '-' : `${Math.round(s)}s`);

/** Table rows: one per group, then the total. */
export function fleetDemandRows(v: { groups: GroupDemand[]; total: GroupDemand }): string[][] {
  return [...v.groups, v.total].map((g) => [
    g.group,
    String(g.capacity),
    secs(g.oldestCapacityWaitSeconds),
    String(g.byReason.starting),
    g.blocked === 0 ? '0' : `${g.blocked} (${DEMAND_REASONS.filter((r) => r !== 'capacity' && r !== 'starting' && g.byReason[r] > 0).map((r) => `${r} ${g.byReason[r]}`).join(', ')})`,
    String(g.leased),
    String(g.running),
    String(g.runners.idle),
    String(g.runners.busy),
    String(g.runners.drained),
    String(g.runners.offline),
  ]);
}

export interface WhatIfStart {
  stepId: number;
  runId: number;
  runnerId: string;
  runner: string;
}

export interface WhatIfStay {
  stepId: number;
  runId: number;
  reason: DemandReason;
  verdict: { code: VerdictCode; reason: string; satisfiable: boolean };
  /** What it was before the levers. */
  was: DemandReason;
}

export interface FleetWhatIfView {
  at: string;
  /** The entries the next tick would start, and where. */
  starts: WhatIfStart[];
  /** Entries that would still wait: how many by reason, and the first `limit` of them with their new verdict. */
  stays: { total: number; byReason: Record<DemandReason, number>; shown: WhatIfStay[] };
  /** Running steps on a runner removed or drained whose placement no other runner matches. */
  orphaned: Array<Pick<CapacityLease, 'stepId' | 'runId' | 'runnerId' | 'executing'> & { runner: string }>;
  /** Runs pinned to a runner removed or drained, with steps still queued. */
  stalled: Array<{ runId: number; runnerId: string; runner: string; queued: number }>;
  /** The total demand before and after, and every group's after. */
  demand: { before: GroupDemand; after: GroupDemand; groups: GroupDemand[] };
  /** Starts the next tick would make with no lever pulled, for comparison. */
  startsBefore: number;
}

/** The what-if read model: starts, stays (the first `limit`, those whose reason changed first), orphans, stalls, demand. */
export function buildFleetWhatIf(s: CapacityState, w: WhatIf, opts: { limit: number }): FleetWhatIfView {
  const names = new Map(s.runners.map((r) => [r.runnerId, r.runnerName || r.runnerId]));
  const nameOf = (id: string) => names.get(id) ?? id.replace(/^what-if-(\d+)$/, '(new $1)');
  const was = new Map(w.before.entries.map((j) => [j.entry.stepId, j.reason]));
  const starts = w.after.entries
    .filter((j) => j.reason === 'starting')
    .sort((a, b) => a.entry.stepId - b.entry.stepId)
    .map((j) => ({ stepId: j.entry.stepId, runId: j.entry.runId, runnerId: j.runnerId!, runner: nameOf(j.runnerId!) }));
  const waiting = w.after.entries.filter((j) => j.reason !== 'starting');
  const byReason = Object.fromEntries(DEMAND_REASONS.map((r) => [r, 0])) as Record<DemandReason, number>;
  for (const j of waiting) byReason[j.reason] += 1;
  for (const r of DEMAND_REASONS) byReason[r] += w.after.tail[r];
  const beyond = DEMAND_REASONS.reduce((n, r) => n + w.after.tail[r], 0);
  // Changed ones first, then in claim order (lane, ready_at, position).
  const claimOrder = (a: (typeof waiting)[number], b: (typeof waiting)[number]) => a.entry.lane - b.entry.lane || a.entry.readyAt.getTime() - b.entry.readyAt.getTime() || a.entry.position - b.entry.position;
  const changed = waiting.filter((j) => was.get(j.entry.stepId) !== j.reason).sort(claimOrder);
  const same = opts.limit > changed.length ? waiting.filter((j) => was.get(j.entry.stepId) === j.reason).sort(claimOrder) : [];
  const changedFirst = [...changed, ...same];
  return {
    at: s.now.toISOString(),
    starts,
    stays: {
      total: waiting.length + beyond,
      byReason,
      shown: changedFirst.slice(0, opts.limit).map((j) => ({
        stepId: j.entry.stepId,
        runId: j.entry.runId,
        reason: j.reason,
        verdict: { code: j.verdict.code, reason: j.verdict.reason, satisfiable: j.verdict.satisfiable },
        was: was.get(j.entry.stepId) ?? j.reason,
      })),
    },
    orphaned: w.orphaned.map((l) => ({ stepId: l.stepId, runId: l.runId, runnerId: l.runnerId, executing: l.executing, runner: nameOf(l.runnerId ?? '') })),
    stalled: w.stalled.map((p) => ({ ...p, runner: nameOf(p.runnerId) })),
    demand: { before: w.before.total, after: w.after.total, groups: w.after.groups },
    startsBefore: w.before.entries.filter((j) => j.reason === 'starting').length,
  };
}

/** One line for the console: what a drain or undrain of one runner would do on the next tick. */
export function whatIfLine(runnerName: string, drained: boolean, v: Pick<FleetWhatIfView, 'starts' | 'startsBefore' | 'stays' | 'orphaned' | 'stalled' | 'demand'>): string {
  const parts = [
    `what if ${runnerName} were ${drained ? 'drained' : 'undrained'}: ${v.starts.length} start next tick (${v.startsBefore} now)`,
    `${v.stays.total} wait, ${v.demand.after.capacity} for capacity (${v.demand.before.capacity} now)`,
  ];
  if (v.orphaned.length) parts.push(`${v.orphaned.length} running step${v.orphaned.length === 1 ? '' : 's'} left with no other runner`);
  if (v.stalled.length) parts.push(`${v.stalled.length} pinned run${v.stalled.length === 1 ? '' : 's'} stall`);
  return `${parts.join('; ')} (nothing changed)`;
}
