import type { QueueEntry } from './entry.js';
import { fitsEver, fitsNow, isIdle, mostCapable } from './load.js';
import { isDrained, NO_DRAINS, placementGaps, placementMatches, type DrainState } from './placement.js';
import { fullPool, type FleetRunner, type PoolState } from './plan.js';

/** A registered runner as the verdict reads it. */
export interface VerdictRunner extends FleetRunner {
  runningLoad: number;
  /** false when it has not polled within a poll window (the registry's `watch` state); absent counts as polling. */
  polling?: boolean;
  /** How many steps it runs at once at most (`--max-parallel-steps`); absent counts as unbounded. */
  maxParallelSteps?: number;
  /** Live leases delivered to it: its parallel steps in use. */
  leases?: number;
}

/**
 * Whether it has a parallel-step slot free. A runner at its max parallel steps asks for nothing
 * (it never parks an acquire), so it takes no work whatever its load headroom. The server does not
 * enforce the runner's own cap (a runner asks for as many offers as it has free slots), so this
 * only names why matching runners take nothing: "full", a capacity wait, never a reason to set an
 * entry aside. A pinned run's own cap is `max_parallel_steps` of the run, checked above.
 */
export function hasSlot(r: Pick<VerdictRunner, 'maxParallelSteps' | 'leases'>): boolean {
  return r.maxParallelSteps === undefined || r.leases === undefined || r.leases < r.maxParallelSteps;
}

const slots = (r: VerdictRunner) => `${r.leases ?? 0}/${r.maxParallelSteps ?? '-'}`;

export interface VerdictFleet {
  runners: VerdictRunner[];
  drains?: DrainState;
  /** run id → how many of its steps are out right now (run-scoped runs). */
  outstandingByRun?: Map<number, number>;
  /** runner id → the run-scoped run it is executing now (it takes nothing else meanwhile). */
  runnerRuns?: Map<string, number>;
}

export interface Postures {
  halted: boolean;
  fleetQuiesced: boolean;
  /** System quiesce (the platform's hold on offers); reads as quiesced, named as the system's. */
  systemQuiesced?: boolean;
  /** The operator's reason for the halt or quiesce, if given. */
  reason?: string | null;
  acceptExceeding: boolean;
}

/** The gates of the verdict ladder, in the order they are checked. */
export const VERDICT_CODES = [
  'halted',
  'quiesced',
  'pool_full',
  'pinned_runner_gone',
  'pinned_runner_mismatch',
  'pinned_runner_busy',
  'no_runner_matches',
  'all_matches_drained',
  'all_matches_offline',
  'all_matches_busy',
  'exceeds_max_load',
  'no_runner_polling',
  'waiting_for_tick',
] as const;
export type VerdictCode = (typeof VERDICT_CODES)[number];

export interface Verdict {
  code: VerdictCode;
  /** One line for people; the exact shapes are documented in docs/fleet-queue.md. */
  reason: string;
  /** false when no waiting alone can dispatch it: an operator or a runner change is needed. */
  satisfiable: boolean;
  /** The runner the reason names (closest, pinned, best free, most capable), if any. */
  runner?: string;
}

const fmt = (n: number) => String(Math.round(n * 100) / 100);
const nameOf = (r: VerdictRunner) => r.runnerName || r.runnerId;

/**
 * The first gate that holds a ready entry, in this order: halted, quiesced, pool full, pinned
 * runner gone / no longer matching / busy, no runner matches (naming the closest runner and what it
 * lacks), every match drained, every match offline, every match busy by load (naming the best
 * free headroom) or full (at its max parallel steps), exceeds max load, no matching runner polling within the window, else waiting for
 * a dispatch tick. Uses the same matcher, drain
 * test, pool test and load rules as planDelivery, so what the queue view says is what dispatch does.
 */
export function verdict(entry: QueueEntry, fleet: VerdictFleet, postures: Postures, pools: PoolState, pins: Map<number, string>): Verdict {
  if (postures.halted) return { code: 'halted', reason: `platform halted${postures.reason ? `: ${postures.reason}` : ''}`, satisfiable: true };
  if (postures.systemQuiesced) return { code: 'quiesced', reason: `system quiesced${postures.reason ? `: ${postures.reason}` : ''}`, satisfiable: true };
  if (postures.fleetQuiesced) return { code: 'quiesced', reason: `fleet quiesced${postures.reason ? `: ${postures.reason}` : ''}`, satisfiable: true };
  const full = fullPool(entry.pools, pools);
  if (full) return { code: 'pool_full', reason: `pool full: ${full}`, satisfiable: true };

  const drains = fleet.drains ?? NO_DRAINS;
  const pinnedId = pins.get(entry.runId);
  let considered = fleet.runners;
  if (pinnedId !== undefined) {
    const r = fleet.runners.find((x) => x.runnerId === pinnedId);
    if (!r || r.online === false) return { code: 'pinned_runner_gone', reason: `pinned runner ${r ? nameOf(r) : pinnedId} gone`, satisfiable: false, runner: r ? nameOf(r) : pinnedId };
    const gaps = placementGaps(entry.requirement, r);
    if (gaps.length) return { code: 'pinned_runner_mismatch', reason: `pinned runner ${nameOf(r)} does not match: ${gaps.join(', ')}`, satisfiable: false, runner: nameOf(r) };
    if (isDrained(r, drains)) return { code: 'pinned_runner_busy', reason: `pinned runner ${nameOf(r)} busy: drained${r.drainReason ? ` (${r.drainReason})` : ''}`, satisfiable: true, runner: nameOf(r) };
    const out = fleet.outstandingByRun?.get(entry.runId) ?? 0;
    if (out >= entry.maxParallel) return { code: 'pinned_runner_busy', reason: `pinned runner ${nameOf(r)} busy: run at max_parallel_steps (${out}/${entry.maxParallel})`, satisfiable: true, runner: nameOf(r) };
    const other = fleet.runnerRuns?.get(r.runnerId);
    if (other !== undefined && other !== entry.runId) return { code: 'pinned_runner_busy', reason: `pinned runner ${nameOf(r)} busy: running run ${other}`, satisfiable: true, runner: nameOf(r) };
    if (fitsEver(r, entry.load) && !fitsNow(r, entry.load)) return { code: 'pinned_runner_busy', reason: `pinned runner ${nameOf(r)} busy: ${headroom(r)} free, step needs ${fmt(entry.load)}`, satisfiable: true, runner: nameOf(r) };
    considered = [r];
  }

  const matching = considered.filter((r) => placementMatches(entry.requirement, r));
  if (matching.length === 0) {
    const closest = closestRunner(entry, considered);
    if (!closest) return { code: 'no_runner_matches', reason: 'no runner matches: no runners registered', satisfiable: false };
    return { code: 'no_runner_matches', reason: `no runner matches: closest ${nameOf(closest.runner)} (${closest.gaps.join(', ')})`, satisfiable: false, runner: nameOf(closest.runner) };
  }
  const undrained = matching.filter((r) => !isDrained(r, drains));
  if (undrained.length === 0) return { code: 'all_matches_drained', reason: `every matching runner drained (${list(matching, true)})`, satisfiable: true };
  const up = undrained.filter((r) => r.online !== false);
  if (up.length === 0) return { code: 'all_matches_offline', reason: `every matching runner offline (${list(undrained)})`, satisfiable: true };

  const couldFit = up.filter((r) => fitsEver(r, entry.load));
  const otherRun = (r: VerdictRunner) => {
    const run = fleet.runnerRuns?.get(r.runnerId);
    return run !== undefined && run !== entry.runId ? run : undefined;
  };
  if (couldFit.length > 0 && !couldFit.some((r) => fitsNow(r, entry.load) && otherRun(r) === undefined && hasSlot(r))) {
    const loadFree = couldFit.filter((r) => fitsNow(r, entry.load));
    if (loadFree.length > 0) {
      const held = loadFree.reduce((a, b) => (nameOf(b) < nameOf(a) ? b : a));
      if (otherRun(held) === undefined) {
        return { code: 'all_matches_busy', reason: `every matching runner full: ${nameOf(held)} at its max parallel steps (${slots(held)})`, satisfiable: true, runner: nameOf(held) };
      }
      return { code: 'all_matches_busy', reason: `every matching runner busy: ${nameOf(held)} is running run ${otherRun(held)} (scope run)`, satisfiable: true, runner: nameOf(held) };
    }
    const best = couldFit.reduce((a, b) => (free(b) > free(a) || (free(b) === free(a) && b.runnerId < a.runnerId) ? b : a));
    return { code: 'all_matches_busy', reason: `every matching runner busy by load: best ${nameOf(best)} has ${headroom(best)} free, step needs ${fmt(entry.load)}`, satisfiable: true, runner: nameOf(best) };
  }
  if (couldFit.length === 0) {
    const top = mostCapable(up)!;
    if (!postures.acceptExceeding) {
      return { code: 'exceeds_max_load', reason: `exceeds max load: step load ${fmt(entry.load)} > largest max_load ${fmt(top.maxLoad)} (${nameOf(top)}), accept_exceeding off`, satisfiable: false, runner: nameOf(top) };
    }
    if (!isIdle(top)) {
      return { code: 'exceeds_max_load', reason: `exceeds max load: step load ${fmt(entry.load)} > largest max_load ${fmt(top.maxLoad)}; waits for ${nameOf(top)} to be idle`, satisfiable: true, runner: nameOf(top) };
    }
  }
  // Registered and not offline, but silent for a poll window: likely calling an old address.
  const takers = couldFit.length > 0 ? couldFit : up;
  if (takers.every((r) => r.polling === false)) {
    return { code: 'no_runner_polling', reason: `no runner polling: no matching runner has polled within the poll window (${list(takers)})`, satisfiable: true };
  }
  return { code: 'waiting_for_tick', reason: 'waiting for a dispatch tick', satisfiable: true };
}

function free(r: VerdictRunner): number {
  return r.maxLoad - r.runningLoad;
}

function headroom(r: VerdictRunner): string {
  return `${fmt(Math.max(0, free(r)))} of ${fmt(r.maxLoad)}`;
}

/** Names in order, the first three shown; `why` adds each one's drain reason (`build-7: kernel update`). */
function list(rs: VerdictRunner[], why = false): string {
  const names = [...rs].sort((a, b) => (nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0)).map((r) => (why && r.drainReason ? `${nameOf(r)}: ${r.drainReason}` : nameOf(r)));
  return names.length > 3 ? `${names.slice(0, 3).join(', ')} and ${names.length - 3} more` : names.join(', ');
}

/** The runner with the fewest gaps (name order breaking ties), and those gaps. */
export function closestRunner(entry: QueueEntry, runners: VerdictRunner[]): { runner: VerdictRunner; gaps: string[] } | undefined {
  let best: { runner: VerdictRunner; gaps: string[] } | undefined;
  for (const runner of runners) {
    const gaps = placementGaps(entry.requirement, runner);
    if (!best || gaps.length < best.gaps.length || (gaps.length === best.gaps.length && nameOf(runner) < nameOf(best.runner))) best = { runner, gaps };
  }
  return best;
}
