import type { PlacementRequirement, QueueEntry, Waiter } from './entry.js';
import { placementMatches } from './placement.js';
import { planDelivery, type PlanOutput, type PoolState, type ReturnCode } from './plan.js';
import { FairShare } from './stride.js';
import { verdict, type Postures, type Verdict, type VerdictRunner } from './verdict.js';

/** A registered runner as capacity reads it: its placement facts, drains, liveness and what it holds. */
export interface CapacityRunner extends VerdictRunner {
  drained: boolean;
  runnerDrained: boolean;
  groupDrained: boolean;
  /** online | watch (silent for a poll window) | offline. */
  state: string;
  maxParallelSteps: number;
  /** Live leases delivered to it. */
  leases: number;
  scopedRunId: number | null;
}

/** A live lease: who holds it and what its step demands. */
export interface CapacityLease {
  stepId: number;
  runId: number;
  runnerId: string | null;
  executing: boolean;
  requirement: PlacementRequirement | null;
  load: number;
}

/** The queue, the fleet and the policy at one instant: what demand and what-if judge. */
export interface CapacityState {
  now: Date;
  /** Every ready entry (the first of a deep queue in claim order), in no particular order; shard, attempt, priority and site stamp are not read (0, 1, 0, null). */
  ready: QueueEntry[];
  /**
   * A queue deeper than the read's bound: the entries after `ready` in claim order, counted by
   * shape with the oldest ready_at. Judged by the verdict alone (never `starting`; no pins).
   */
  tail: Array<{ requirement: PlacementRequirement | null; pools: string[]; load: number; count: number; oldestReadyAt: Date }>;
  leases: CapacityLease[];
  runners: CapacityRunner[];
  /** Every group that exists (a row, or a runner naming it), with its attributes. */
  groups: Map<string, { attributes: Record<string, string>; exclusive: boolean }>;
  /** Every pool with a limit or a holder; limit null: unlimited. */
  pools: Map<string, { limit: number | null; held: number }>;
  pins: Map<number, string>;
  outstandingByRun: Map<number, number>;
  projects: Set<string>;
  postures: Omit<Postures, 'acceptExceeding'>;
}

/**
 * Why a ready entry waits, as demand counts it (a closed set: the `reason` label of
 * opschain_group_demand). `capacity` is the autoscaling signal: every runner its placement matches
 * (undrained, online) is full by load, by slots or by a run-scoped run, or taken by entries ahead
 * of it this tick, and nothing else holds it: more runners of that shape would start it.
 * `starting` would go on the next tick to a runner with room. The rest need something runners
 * cannot supply: a pool at its limit, a fleet posture, its pinned runner, its run's
 * max_parallel_steps, a placement no runner satisfies (or a step larger than every match with
 * accept_exceeding off), every match drained, offline, or silent.
 */
export const DEMAND_REASONS = ['capacity', 'starting', 'pool', 'posture', 'pinned', 'run_cap', 'unmatched', 'drained', 'offline', 'not_polling'] as const;
export type DemandReason = (typeof DEMAND_REASONS)[number];

/** The group label of runners with no group, and of entries no runner or named group matches. */
export const NO_GROUP = '(none)';
export const UNMATCHED = '(unmatched)';

export type RunnerTally = { idle: number; busy: number; drained: number; offline: number };

export interface GroupDemand {
  group: string;
  /** Entries waiting only for capacity: the autoscaling signal. */
  capacity: number;
  /** Entries held by what runners cannot fix (every reason but capacity and starting). */
  blocked: number;
  byReason: Record<DemandReason, number>;
  /** Steps on this group's runners: offered or acknowledged, and executing. */
  leased: number;
  running: number;
  runners: RunnerTally;
  /** Since ready_at of the oldest capacity-bound entry, by the database clock; 0 when none. */
  oldestCapacityWaitSeconds: number;
  /** Steps the group would run at once with room for them: leased + running + starting + capacity. */
  stepsWanted: number;
}

/** One entry's judgement: its verdict against the whole fleet, its demand reason, its groups. */
export interface EntryJudgement {
  entry: QueueEntry;
  verdict: Verdict;
  reason: DemandReason;
  groups: string[];
  /** The runner it would be delivered to on the next tick (reason `starting`). */
  runnerId?: string;
}

export interface Demand {
  /** Entries judged by shape beyond the read's bound (CapacityState.tail), by reason. */
  tail: Record<DemandReason, number>;
  groups: GroupDemand[];
  /** Every entry counted once, however many groups it is attributed to. */
  total: GroupDemand;
  entries: EntryJudgement[];
  plan: PlanOutput;
}

/** The runners a tick would find parked: online (polling), undrained, with a free slot; each with its free slots. */
export function parkedWaiters(runners: CapacityRunner[]): Waiter[] {
  return runners
    .filter((r) => r.state === 'online' && !r.drained && r.maxParallelSteps - r.leases > 0)
    .map((r) => ({ ...r, slots: r.maxParallelSteps - r.leases, onlyRunId: null, drained: false }));
}

const REASON_OF: Partial<Record<Verdict['code'], DemandReason>> = {
  halted: 'posture',
  quiesced: 'posture',
  pool_full: 'pool',
  pinned_runner_gone: 'pinned',
  pinned_runner_mismatch: 'pinned',
  pinned_runner_busy: 'pinned',
  no_runner_matches: 'unmatched',
  all_matches_drained: 'drained',
  all_matches_offline: 'offline',
  all_matches_busy: 'capacity',
  no_runner_polling: 'not_polling',
};

const RETURN_REASON: Record<ReturnCode, DemandReason> = {
  pool_full: 'pool',
  run_at_cap: 'run_cap',
  pinned_runner_not_parked: 'pinned',
  no_waiter_matches: 'capacity',
  slots_taken: 'capacity',
  busy_by_load: 'capacity',
  exceeds_max_load: 'capacity',
};

function reasonOf(e: QueueEntry, v: Verdict, returned: ReturnCode | undefined, outstanding: Map<number, number>): DemandReason {
  if (v.code === 'exceeds_max_load') return v.satisfiable ? 'capacity' : 'unmatched';
  if (v.code === 'pinned_runner_busy' && (outstanding.get(e.runId) ?? 0) >= e.maxParallel) return 'run_cap';
  const r = REASON_OF[v.code];
  if (r) return r;
  // waiting_for_tick, yet this tick's plan returns it: pools and run caps filled by entries ahead
  // of it, its pinned runner without a free poll, or every matching runner's room taken.
  return returned ? RETURN_REASON[returned] : 'capacity';
}

const emptyReasons = (): Record<DemandReason, number> => Object.fromEntries(DEMAND_REASONS.map((r) => [r, 0])) as Record<DemandReason, number>;
const emptyGroup = (group: string): GroupDemand => ({
  group,
  capacity: 0,
  blocked: 0,
  byReason: emptyReasons(),
  leased: 0,
  running: 0,
  runners: { idle: 0, busy: 0, drained: 0, offline: 0 },
  oldestCapacityWaitSeconds: 0,
  stepsWanted: 0,
});

/** offline, else drained, else busy (a lease out), else idle. */
export function runnerCondition(r: CapacityRunner): keyof RunnerTally {
  return r.state === 'offline' ? 'offline' : r.drained ? 'drained' : r.leases > 0 ? 'busy' : 'idle';
}

const groupName = (g: string | null) => g ?? NO_GROUP;

/**
 * The groups an entry is attributed to: those of every runner its placement matches (any state),
 * or of its pinned runner; matching none, the existing groups its requirement names, else
 * `(unmatched)`. Only names that exist can come out, so the label set is the registry's.
 */
function groupsOf(req: PlacementRequirement | null, runners: CapacityRunner[], known: Map<string, unknown>): string[] {
  const out = new Set<string>();
  for (const r of runners) if (placementMatches(req, r)) out.add(groupName(r.group));
  if (out.size === 0 && req?.group !== undefined) for (const g of Array.isArray(req.group) ? req.group : [req.group]) if (known.has(g)) out.add(g);
  if (out.size === 0) out.add(UNMATCHED);
  return [...out].sort();
}

/** The pool state the planner and the verdict read: pools with a limit. */
export function poolLimits(pools: CapacityState['pools']): PoolState {
  const out: PoolState = new Map();
  for (const [name, p] of pools) if (p.limit !== null) out.set(name, { limit: p.limit, held: p.held });
  return out;
}

/**
 * Per group: why each ready entry waits, through the verdict ladder and the planner the dispatcher
 * uses. The next tick is planned with every online, undrained runner with a free slot parked
 * (its free slots, max_parallel_steps less its leases), every ready entry claimed in queue order
 * and a fresh stride state; under a fleet posture nothing is planned.
 */
export function demandOf(s: CapacityState, opts: { acceptExceeding: boolean; fairShare?: FairShare }): Demand {
  const postures: Postures = { ...s.postures, acceptExceeding: opts.acceptExceeding };
  const runnerRuns = new Map(s.runners.filter((r) => r.scopedRunId !== null).map((r) => [r.runnerId, r.scopedRunId!]));
  const pools = poolLimits(s.pools);
  const held = s.postures.halted || s.postures.fleetQuiesced || s.postures.systemQuiesced;
  const plan: PlanOutput = held
    ? { deliveries: [], returned: [] }
    : planDelivery({
        claims: s.ready,
        waiters: parkedWaiters(s.runners),
        pools,
        pins: s.pins,
        outstandingByRun: s.outstandingByRun,
        acceptExceeding: opts.acceptExceeding,
        fairShare: opts.fairShare,
        fleet: s.runners.filter((r) => !r.drained),
        runnerRuns,
      });
  const startsOn = new Map(plan.deliveries.map((d) => [d.entry.stepId, d.waiter.runnerId]));
  const returned = new Map(plan.returned.map((r) => [r.entry.stepId, r.code]));
  const fleet = { runners: s.runners, outstandingByRun: s.outstandingByRun, runnerRuns };
  const byId = new Map(s.runners.map((r) => [r.runnerId, r]));

  // Entries sharing a shape share a verdict and groups: judge each shape once (10,000 entries
  // over 500 runners is a handful of shapes). A run that pins, holds or is held by a runner is
  // judged on its own.
  const scopedRuns = new Set(runnerRuns.values());
  const verdicts = new Map<PlacementRequirement | null, Map<string, Verdict>>();
  const groupsByReq = new Map<string, string[]>();
  const entries: EntryJudgement[] = [];
  const reqKeys = new Map<PlacementRequirement | null, string>();
  const reqKey = (r: PlacementRequirement | null) => reqKeys.get(r) ?? (reqKeys.set(r, JSON.stringify(r)), reqKeys.get(r)!);
  for (const e of s.ready) {
    const req = reqKey(e.requirement);
    const own = s.pins.has(e.runId) || scopedRuns.has(e.runId);
    const key = `${e.load}|${e.pools.length ? e.pools.join(',') : ''}|${own ? e.runId : ''}`;
    let byKey = verdicts.get(e.requirement);
    if (!byKey) verdicts.set(e.requirement, (byKey = new Map()));
    let v = byKey.get(key);
    if (!v) byKey.set(key, (v = verdict(e, fleet, postures, pools, s.pins)));
    const pinned = s.pins.get(e.runId);
    let groups: string[];
    if (pinned !== undefined && byId.has(pinned)) groups = [groupName(byId.get(pinned)!.group)];
    else {
      groups = groupsByReq.get(req)!;
      if (!groups) groupsByReq.set(req, (groups = groupsOf(e.requirement, s.runners, s.groups)));
    }
    const runnerId = startsOn.get(e.stepId);
    const reason: DemandReason = runnerId !== undefined ? 'starting' : reasonOf(e, v, returned.get(e.stepId), s.outstandingByRun);
    entries.push({ entry: e, verdict: v, reason, groups, ...(runnerId !== undefined ? { runnerId } : {}) });
  }

  const rows = new Map<string, GroupDemand>();
  const row = (g: string) => rows.get(g) ?? (rows.set(g, emptyGroup(g)), rows.get(g)!);
  for (const g of s.groups.keys()) row(g);
  for (const r of s.runners) row(groupName(r.group));
  const total = emptyGroup('(all)');
  const nowMs = s.now.getTime();
  const count = (d: GroupDemand, j: EntryJudgement) => {
    d.byReason[j.reason] += 1;
    if (j.reason === 'capacity') {
      d.capacity += 1;
      d.oldestCapacityWaitSeconds = Math.max(d.oldestCapacityWaitSeconds, Math.max(0, (nowMs - j.entry.readyAt.getTime()) / 1000));
    } else if (j.reason !== 'starting') d.blocked += 1;
  };
  for (const j of entries) {
    for (const g of j.groups) count(row(g), j);
    count(total, j);
  }
  // Beyond the bound: one synthetic entry per shape, its verdict for all of them.
  const tail = emptyReasons();
  for (const t of s.tail) {
    const e: QueueEntry = { stepId: 0, runId: 0, shard: 0, attempt: 1, priority: 0, lane: 2, fairKey: '', weight: 1, pools: t.pools, requirement: t.requirement, load: t.load, runScope: false, maxParallel: 1, siteStamp: null, readyAt: t.oldestReadyAt, position: 0 };
    const v = verdict(e, fleet, postures, pools, new Map());
    const reason = reasonOf(e, v, undefined, new Map());
    const groups = groupsByReq.get(reqKey(t.requirement)) ?? groupsOf(t.requirement, s.runners, s.groups);
    tail[reason] += t.count;
    for (const d of [...groups.map(row), total]) {
      d.byReason[reason] += t.count;
      if (reason === 'capacity') {
        d.capacity += t.count;
        d.oldestCapacityWaitSeconds = Math.max(d.oldestCapacityWaitSeconds, Math.max(0, (nowMs - t.oldestReadyAt.getTime()) / 1000));
      } else d.blocked += t.count;
    }
  }
  for (const r of s.runners) {
    const c = runnerCondition(r);
    row(groupName(r.group)).runners[c] += 1;
    total.runners[c] += 1;
  }
  for (const l of s.leases) {
    const r = l.runnerId ? byId.get(l.runnerId) : undefined;
    const k = l.executing ? 'running' : 'leased';
    if (r) row(groupName(r.group))[k] += 1;
    total[k] += 1;
  }
  for (const d of [...rows.values(), total]) d.stepsWanted = d.leased + d.running + d.byReason.starting + d.capacity;
  const groups = [...rows.values()].sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : 0));
  return { tail, groups, total, entries, plan };
}

/** The levers a what-if tries, runner names already resolved to ids. */
export interface Levers {
  drain: string[];
  drainGroups: string[];
  undrain: string[];
  undrainGroups: string[];
  /** pool → its new limit. */
  pools: Map<string, number>;
  /** project (fair key) → its new weight. */
  weights: Map<string, number>;
  add: { count: number; group: string; labels: string[]; maxLoad?: number } | null;
  remove: string[];
}

export const NO_LEVERS: Levers = { drain: [], drainGroups: [], undrain: [], undrainGroups: [], pools: new Map(), weights: new Map(), add: null, remove: [] };

/** The id of the n-th runner a what-if adds (never a registered id: ids are `rnr_…`). */
export const addedRunnerId = (n: number) => `what-if-${n}`;

/**
 * The state as it would be with the levers pulled, nothing else changed: drains set or cleared
 * on runners and groups, pool limits and project weights replaced, runners removed, and runners
 * added in a group (its attributes, executors and max_load of one of its runners unless given).
 */
export function applyLevers(s: CapacityState, l: Levers): CapacityState {
  const removed = new Set(l.remove);
  let runners = s.runners.filter((r) => !removed.has(r.runnerId)).map((r) => {
    let runnerDrained = r.runnerDrained;
    let groupDrained = r.groupDrained;
    if (l.drain.includes(r.runnerId)) runnerDrained = true;
    if (l.undrain.includes(r.runnerId)) runnerDrained = false;
    if (r.group !== null && l.drainGroups.includes(r.group)) groupDrained = true;
    if (r.group !== null && l.undrainGroups.includes(r.group)) groupDrained = false;
    return { ...r, runnerDrained, groupDrained, drained: runnerDrained || groupDrained, drainReason: runnerDrained || groupDrained ? r.drainReason : null };
  });
  if (l.add && l.add.count > 0) {
    const group = l.add.group;
    const like = s.runners.find((r) => r.group === group);
    const g = s.groups.get(group);
    const groupDrained = l.undrainGroups.includes(group) ? false : l.drainGroups.includes(group) || (like?.groupDrained ?? false);
    for (let i = 1; i <= l.add.count; i++) {
      runners = runners.concat({
        runnerId: addedRunnerId(i),
        runnerName: `(new ${group} ${i})`,
        group,
        labels: [...l.add.labels],
        executors: like?.executors ?? ['shell'],
        groupAttributes: g?.attributes ?? like?.groupAttributes ?? {},
        exclusive: g?.exclusive ?? like?.exclusive ?? false,
        maxLoad: l.add.maxLoad ?? like?.maxLoad ?? 4,
        runningLoad: 0,
        polling: true,
        online: true,
        drained: groupDrained,
        runnerDrained: false,
        groupDrained,
        drainReason: null,
        state: 'online',
        maxParallelSteps: like?.maxParallelSteps ?? 1,
        leases: 0,
        scopedRunId: null,
      });
    }
  }
  const pools = new Map(s.pools);
  for (const [name, limit] of l.pools) pools.set(name, { limit, held: s.pools.get(name)?.held ?? 0 });
  const ready = l.weights.size === 0 ? s.ready : s.ready.map((e) => (l.weights.has(e.fairKey) ? { ...e, weight: l.weights.get(e.fairKey)! } : e));
  const pins = new Map(s.pins);
  return { ...s, runners, pools, ready, pins };
}

export interface WhatIf {
  before: Demand;
  after: Demand;
  /** Running steps on a runner the levers remove or drain whose placement no other undrained, online runner matches. */
  orphaned: CapacityLease[];
  /** Runs pinned to a runner the levers remove or drain: their queued steps wait for it. */
  stalled: Array<{ runId: number; runnerId: string; queued: number }>;
}

/** The levers tried against the state: the next tick and the demand before and after, through the same planner and verdicts. */
export function whatIf(s: CapacityState, l: Levers, opts: { acceptExceeding: boolean }): WhatIf {
  const after = applyLevers(s, l);
  const afterById = new Map(after.runners.map((r) => [r.runnerId, r]));
  const lost = new Set(s.runners.filter((r) => !r.drained && (!afterById.has(r.runnerId) || afterById.get(r.runnerId)!.drained)).map((r) => r.runnerId));
  for (const id of l.remove) lost.add(id);
  const remaining = after.runners.filter((r) => !r.drained && r.state !== 'offline' && !lost.has(r.runnerId));
  const orphaned = s.leases.filter((x) => x.runnerId !== null && lost.has(x.runnerId) && !remaining.some((r) => placementMatches(x.requirement, r)));
  const queued = new Map<number, number>();
  for (const e of s.ready) queued.set(e.runId, (queued.get(e.runId) ?? 0) + 1);
  const stalled = [...s.pins]
    .filter(([runId, runnerId]) => lost.has(runnerId) && (queued.get(runId) ?? 0) > 0)
    .map(([runId, runnerId]) => ({ runId, runnerId, queued: queued.get(runId)! }))
    .sort((a, b) => a.runId - b.runId);
  return { before: demandOf(s, opts), after: demandOf(after, opts), orphaned, stalled };
}
