import type { QueueEntry, Waiter } from './entry.js';
import { chooseByLoad, type Capacity } from './load.js';
import { isDrained, NO_DRAINS, placementMatches, type DrainState, type RunnerPlacement } from './placement.js';
import { DispatchOrder, FairShare } from './stride.js';

/** Limits and current holders of the pools a batch demands; a pool absent here is unlimited. */
export type PoolState = Map<string, { limit: number; held: number }>;

/** A registered runner as a tick sees it, parked or not (for "exceeds every max_load"). */
export interface FleetRunner extends RunnerPlacement {
  maxLoad: number;
  drained?: boolean;
  /** Why it is drained (itself or through its group), when an operator said; shown by verdicts. */
  drainReason?: string | null;
  /** false for a runner the registry marks offline (never counted); absent counts as online. */
  online?: boolean;
}

export interface PlanInput {
  /** This tick's claims, in claim order. */
  claims: QueueEntry[];
  /** The acquire calls parked at the tick's start. */
  waiters: Waiter[];
  pools: PoolState;
  /** run id → pinned runner id. */
  pins: Map<number, string>;
  /** run id → how many of its steps are out (leased and delivered) right now. */
  outstandingByRun: Map<number, number>;
  acceptExceeding: boolean;
  /** The dispatcher's stride state; read only (the plan charges a copy). Absent: a fresh state. */
  fairShare?: FairShare;
  /** The tick's one read of operator drains; a waiter's own `drained` flag counts too. */
  drains?: DrainState;
  /** runner id → running load; overrides the waiters' own `runningLoad`. */
  runningLoad?: Map<string, number>;
  /**
   * Every live registered runner. Only used to decide "exceeds max load" against the whole fleet
   * rather than the runners parked this tick; absent, the parked waiters stand for the fleet.
   */
  fleet?: FleetRunner[];
  /**
   * runner id → the run-scoped run it is executing now. Such a runner takes only that run's work
   * (one run per runner at a time), whatever its polls ask for.
   */
  runnerRuns?: Map<string, number>;
}

export interface Delivery {
  entry: QueueEntry;
  waiter: Waiter;
  /** this delivery creates the run's pin: write run_pins before delivering */
  pin: boolean;
  /** the step's load exceeds every matching runner's max_load; accepted by the idle most capable one (log a warning) */
  exceedsMaxLoad: boolean;
}

export type ReturnCode = 'pool_full' | 'run_at_cap' | 'pinned_runner_not_parked' | 'no_waiter_matches' | 'slots_taken' | 'busy_by_load' | 'exceeds_max_load';

/** Returns that only capacity ends (a parked match had no slot or no load left): never a reason to set an entry aside. */
export const CAPACITY_RETURNS: ReadonlySet<ReturnCode> = new Set<ReturnCode>(['slots_taken', 'busy_by_load']);

export interface PlanOutput {
  deliveries: Delivery[];
  /** Claims that go back to the queue at their original position, with why. */
  returned: Array<{ entry: QueueEntry; reason: string; code: ReturnCode }>;
}

interface Slot { waiter: Waiter; left: number }

/** The first of the step's pools (name order) that has no room left, with its holders and limit, or null. */
export function firstFullPool(pools: string[], state: PoolState, extra: Map<string, number> = new Map()): { name: string; held: number; limit: number } | null {
  for (const name of [...pools].sort()) {
    const p = state.get(name);
    if (!p) continue;
    const held = p.held + (extra.get(name) ?? 0);
    if (held >= p.limit) return { name, held, limit: p.limit };
  }
  return null;
}

/** `db (3/3)` for the first of the step's pools (name order) that has no room left, or null. */
export function fullPool(pools: string[], state: PoolState, extra: Map<string, number> = new Map()): string | null {
  const full = firstFullPool(pools, state, extra);
  return full ? `${full.name} (${full.held}/${full.limit})` : null;
}

/**
 * Decides, for one dispatch tick, which claim goes to which parked waiter. Pure: the dispatcher
 * and the inspection views call the same function.
 *
 * Claims are taken in (lane, stride pass, ready_at) order. For each, in this order: every pool it
 * demands must have room (all or none, counting this plan's earlier admissions); a pinned run goes
 * only to its pinned runner and never past max_parallel out at once (a pin made earlier in this
 * plan binds its siblings), and a runner executing a run-scoped run takes nothing else; placement picks the parked waiters that match, undrained, with slots;
 * load picks the least loaded that fits, or the idle most capable runner for a step larger than
 * every matching max_load when acceptExceeding. Anything else returns to the queue with a reason.
 * Nothing here over-admits: pool holds, slots and running load are tallied as deliveries are planned.
 */
export function planDelivery(input: PlanInput): PlanOutput {
  const fair = (input.fairShare ?? new FairShare()).clone();
  const drains = input.drains ?? NO_DRAINS;
  const slots: Slot[] = input.waiters.map((waiter) => ({ waiter, left: waiter.slots }));
  const running = new Map<string, number>();
  for (const w of input.waiters) running.set(w.runnerId, input.runningLoad?.get(w.runnerId) ?? Math.max(running.get(w.runnerId) ?? 0, w.runningLoad));
  const fleet = mergeFleet(input.fleet, input.waiters);
  const pins = new Map(input.pins);
  const runnerRuns = new Map(input.runnerRuns);
  const outstanding = new Map(input.outstandingByRun);
  const poolsTaken = new Map<string, number>();
  const deliveries: Delivery[] = [];
  const returned: PlanOutput['returned'] = [];
  const back = (entry: QueueEntry, code: ReturnCode, reason: string) => returned.push({ entry, code, reason });

  // Slots only shrink as a plan goes on: a claim that found no open parked call for its
  // placement finds none later either, and is returned with the same code, while no runner is
  // newly held by a run. Only for claims no run-level state singles out: no pools, not scoped or
  // pinned, its run neither held by a runner nor named by a call. Spares a deep batch a scan of
  // every call per claim.
  const special = new Set<number>(runnerRuns.values());
  for (const w of input.waiters) if (w.onlyRunId !== null) special.add(w.onlyRunId);
  const noRoom = new Map<string, { code: ReturnCode; reason: string }>();
  const shapes = new Map<QueueEntry['requirement'], string>();
  const shapeOf = (r: QueueEntry['requirement']) => shapes.get(r) ?? (shapes.set(r, JSON.stringify(r)), shapes.get(r)!);

  const order = new DispatchOrder(input.claims, fair);
  for (let entry = order.next(); entry; entry = order.next()) {
    const full = fullPool(entry.pools, input.pools, poolsTaken);
    if (full) {
      back(entry, 'pool_full', `pool full: ${full}`);
      continue;
    }
    const pinned = pins.get(entry.runId);
    const scoped = entry.runScope || pinned !== undefined;
    const shape = !scoped && entry.pools.length === 0 && !special.has(entry.runId) ? shapeOf(entry.requirement) : undefined;
    const known = shape === undefined ? undefined : noRoom.get(shape);
    if (known) {
      back(entry, known.code, known.reason);
      continue;
    }
    if (scoped) {
      const out = outstanding.get(entry.runId) ?? 0;
      if (out >= entry.maxParallel) {
        back(entry, 'run_at_cap', `run at max_parallel_steps (${out}/${entry.maxParallel})`);
        continue;
      }
    }
    const eligible = (w: Waiter) =>
      (w.onlyRunId === null || w.onlyRunId === entry!.runId) &&
      (pinned === undefined || w.runnerId === pinned) &&
      (runnerRuns.get(w.runnerId) ?? entry!.runId) === entry!.runId &&
      !isDrained(w, drains) &&
      placementMatches(entry!.requirement, w);
    const open = slots.filter((s) => s.left > 0 && eligible(s.waiter));
    if (open.length === 0) {
      if (pinned !== undefined) back(entry, 'pinned_runner_not_parked', `pinned runner ${pinned} has no free poll`);
      else if (slots.some((s) => eligible(s.waiter))) back(entry, 'slots_taken', 'every matching parked call is full');
      else back(entry, 'no_waiter_matches', 'no parked runner matches');
      if (shape !== undefined) noRoom.set(shape, returned[returned.length - 1]);
      continue;
    }
    const candidates: Array<Capacity & { slot: Slot }> = open.map((slot) => ({ runnerId: slot.waiter.runnerId, maxLoad: slot.waiter.maxLoad, runningLoad: running.get(slot.waiter.runnerId) ?? 0, slot }));
    const matching = fleet.filter((r) => (pinned === undefined || r.runnerId === pinned) && !isDrained(r, drains) && placementMatches(entry!.requirement, r));
    const choice = chooseByLoad(entry.load, candidates, matching, input.acceptExceeding);
    if (choice.kind === 'busy') {
      back(entry, 'busy_by_load', 'every matching parked runner is busy by load');
      continue;
    }
    if (choice.kind === 'exceeds') {
      const top = choice.mostCapable;
      back(entry, 'exceeds_max_load', input.acceptExceeding && top ? `exceeds max load: waits for ${top.runnerId} (max_load ${top.maxLoad}) to be idle` : 'exceeds max load');
      continue;
    }
    const { slot } = choice.runner;
    slot.left -= 1;
    running.set(slot.waiter.runnerId, (running.get(slot.waiter.runnerId) ?? 0) + entry.load);
    for (const p of entry.pools) poolsTaken.set(p, (poolsTaken.get(p) ?? 0) + 1);
    if (scoped) outstanding.set(entry.runId, (outstanding.get(entry.runId) ?? 0) + 1);
    const pin = entry.runScope && pinned === undefined;
    if (pin) pins.set(entry.runId, slot.waiter.runnerId);
    if (scoped) {
      runnerRuns.set(slot.waiter.runnerId, entry.runId);
      noRoom.clear(); // a runner now held by a run: which calls a shape matches has changed
    }
    fair.charge(entry.lane, entry.fairKey, entry.weight);
    deliveries.push({ entry, waiter: slot.waiter, pin, exceedsMaxLoad: choice.kind === 'exceeding' });
  }
  return { deliveries, returned };
}

function mergeFleet(fleet: FleetRunner[] | undefined, waiters: Waiter[]): FleetRunner[] {
  const byId = new Map<string, FleetRunner>();
  for (const r of fleet ?? []) if (r.online !== false) byId.set(r.runnerId, r);
  for (const w of waiters) if (!byId.has(w.runnerId)) byId.set(w.runnerId, w);
  return [...byId.values()];
}
