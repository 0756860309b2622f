/**
 * Runner capacity, after Opencast's job loads: every step carries a load, every runner a max_load,
 * and a runner's running load is the sum of its live leases' loads.
 */

/** Float sums of fractional loads must not turn an exact fit into a refusal. */
const EPSILON = 1e-9;
/** Load factors this close count as a tie, broken toward the larger max_load. */
export const NEAR_TIE = 0.01;

export interface Capacity {
  runnerId: string;
  maxLoad: number;
  runningLoad: number;
}

/** "Too busy right now" is the negation: running load + the step's load stays within max_load. */
export function fitsNow(c: Capacity, load: number): boolean {
  return c.runningLoad + load <= c.maxLoad + EPSILON;
}

/** Whether the step could ever fit this runner, whatever it is running. */
export function fitsEver(c: Pick<Capacity, 'maxLoad'>, load: number): boolean {
  return load <= c.maxLoad + EPSILON;
}

export function loadFactor(c: Capacity): number {
  return c.maxLoad > 0 ? c.runningLoad / c.maxLoad : c.runningLoad > 0 ? Infinity : 0;
}

export function isIdle(c: Capacity): boolean {
  return c.runningLoad <= EPSILON;
}

/**
 * Opencast's LoadComparator: load factor ascending; factors within 0.01 of each other are a tie,
 * won by the larger max_load (the most capable runner); runner id last, so the order is stable.
 */
export function compareLoad(a: Capacity, b: Capacity): number {
  const fa = loadFactor(a);
  const fb = loadFactor(b);
  if (Math.abs(fa - fb) > NEAR_TIE || (fa === Infinity) !== (fb === Infinity)) return fa < fb ? -1 : 1;
  if (a.maxLoad !== b.maxLoad) return b.maxLoad - a.maxLoad;
  return a.runnerId < b.runnerId ? -1 : a.runnerId > b.runnerId ? 1 : 0;
}

/** The least loaded of the candidates (first in compareLoad order), or undefined. */
export function leastLoaded<T extends Capacity>(candidates: T[]): T | undefined {
  let best: T | undefined;
  for (const c of candidates) if (!best || compareLoad(c, best) < 0) best = c;
  return best;
}

/** The most capable runner: the largest max_load, runner id breaking ties. */
export function mostCapable<T extends Pick<Capacity, 'runnerId' | 'maxLoad'>>(runners: T[]): T | undefined {
  let best: T | undefined;
  for (const r of runners) if (!best || r.maxLoad > best.maxLoad || (r.maxLoad === best.maxLoad && r.runnerId < best.runnerId)) best = r;
  return best;
}

export type LoadChoice<T> =
  | { kind: 'fits'; runner: T }
  | { kind: 'exceeding'; runner: T }
  | { kind: 'busy' }
  | { kind: 'exceeds'; mostCapable: Pick<Capacity, 'runnerId' | 'maxLoad'> | undefined };

/**
 * Chooses among the parked candidates that placement allows. `matching` is every runner the step
 * could match (parked or not, drains excluded): a step larger than all of their max_loads goes, when
 * acceptExceeding is on, to the most capable of them and only while it is idle and parked here.
 */
export function chooseByLoad<T extends Capacity>(load: number, candidates: T[], matching: Array<Pick<Capacity, 'runnerId' | 'maxLoad'>>, acceptExceeding: boolean): LoadChoice<T> {
  const fitting = candidates.filter((c) => fitsNow(c, load));
  const best = leastLoaded(fitting);
  if (best) return { kind: 'fits', runner: best };
  const pool = matching.length ? matching : candidates;
  if (pool.some((r) => fitsEver(r, load))) return { kind: 'busy' };
  const top = mostCapable(pool);
  if (acceptExceeding && top) {
    const parked = candidates.find((c) => c.runnerId === top.runnerId && isIdle(c));
    if (parked) return { kind: 'exceeding', runner: parked };
  }
  return { kind: 'exceeds', mostCapable: top };
}
